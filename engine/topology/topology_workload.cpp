// The [workload] table of a topology file (format: topologies/README.md).

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/model/model_limits.hpp"
#include "engine/sv_cat.hpp"
#include "engine/topology/topology_sections.hpp"

namespace muflow::engine::topology::topology_detail {
namespace {

constexpr std::string_view kWorkloadKeys[] = {
    "kind", "max_new_tokens", "file",        "prompts",      "num_requests",     "rate",
    "input", "output",        "seed",        "time_scale",   "max_requests",
    "max_prompt_tokens"};

// Which kinds each kind-specific key applies to ("kind" and "max_new_tokens" apply to all).
const std::map<std::string_view, std::vector<std::string_view>>& key_kinds() {
  static const auto* kinds = new std::map<std::string_view, std::vector<std::string_view>>{
      {"file", {"prompts", "trace"}},
      {"prompts", {"prompts", "ids"}},
      {"num_requests", {"poisson"}},
      {"rate", {"poisson"}},
      {"input", {"poisson"}},
      {"output", {"poisson"}},
      {"seed", {"poisson", "trace"}},
      {"time_scale", {"trace"}},
      {"max_requests", {"trace"}},
      {"max_prompt_tokens", {"trace"}},
  };
  return *kinds;
}

absl::Status check_kind_keys(const TomlTableReader& r, const std::string& kind) {
  for (const auto& [key, kinds] : key_kinds()) {
    if (!r.has(key)) continue;
    if (std::find(kinds.begin(), kinds.end(), kind) != kinds.end()) continue;
    std::vector<std::string> quoted;
    for (std::string_view k : kinds) quoted.push_back(sv_cat("\"", k, "\""));
    return r.error(key, sv_cat("applies to kind = ", sv_join(quoted, " or "),
                                     ", not kind = \"", kind, "\""));
  }
  return absl::OkStatus();
}

absl::Status read_text_prompts(const TomlTableReader& r, std::vector<std::string>* out) {
  const toml::array* arr = r.node("prompts")->as_array();
  const char* expected = "expected a non-empty array of non-empty strings";
  if (arr == nullptr || arr->empty()) {
    return r.error("prompts", sv_cat(expected, ", got ",
                                           arr ? "an empty array"
                                               : toml_type_name(*r.node("prompts"))));
  }
  for (size_t i = 0; i < arr->size(); ++i) {
    const auto* s = (*arr)[i].as_string();
    if (s == nullptr || s->get().empty()) {
      return r.error("prompts", sv_cat(expected, "; element ", i, " is ",
                                             s ? "empty" : toml_type_name((*arr)[i])));
    }
    out->push_back(s->get());
  }
  return absl::OkStatus();
}

absl::Status read_id_prompts(const TomlTableReader& r, int64_t vocab_size,
                             std::vector<std::vector<int32_t>>* out) {
  const char* expected = "expected an array of non-empty token-id arrays like [[1, 2, 3]]";
  const toml::node* n = r.node("prompts");
  if (n == nullptr) {
    return r.table_error("[workload] kind = \"ids\" needs prompts = [[id, ...], ...]");
  }
  const toml::array* arr = n->as_array();
  if (arr == nullptr || arr->empty()) {
    return r.error("prompts", sv_cat(expected, ", got ",
                                           arr ? "an empty array" : toml_type_name(*n)));
  }
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::array* ids = (*arr)[i].as_array();
    if (ids == nullptr || ids->empty()) {
      return r.error("prompts", sv_cat(expected, "; prompt ", i, " is ",
                                             ids ? "empty" : toml_type_name((*arr)[i])));
    }
    std::vector<int32_t> prompt;
    for (size_t j = 0; j < ids->size(); ++j) {
      const auto* id = (*ids)[j].as_integer();
      if (id == nullptr) {
        return r.error("prompts", sv_cat(expected, "; prompt ", i, " position ", j,
                                               " is ", toml_type_name((*ids)[j])));
      }
      const int64_t limit = vocab_size > 0 ? vocab_size : int64_t{INT32_MAX};
      if (id->get() < 0 || id->get() >= limit) {
        return r.error("prompts", sv_cat("prompt ", i, " position ", j, ": token id ",
                                               id->get(), " is outside [0, ", limit, ")"));
      }
      prompt.push_back(static_cast<int32_t>(id->get()));
    }
    out->push_back(std::move(prompt));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status parse_workload_table(const TomlTableReader& r, const std::filesystem::path& base_dir,
                                  int64_t vocab_size, WorkloadSpec* out) {
  if (absl::Status s = r.check_keys(kWorkloadKeys); !s.ok()) return s;
  WorkloadSpec w;
  if (absl::Status s = r.read_choice("kind", &w.kind, kKnownWorkloadKinds); !s.ok()) return s;
  if (absl::Status s = check_kind_keys(r, w.kind); !s.ok()) return s;
  // prompts/ids: tokens to generate per request (>= 1). poisson/trace: an upper clamp on the
  // generated lengths, 0 (the default there) = no clamp.
  const bool clamp_only = w.kind == "poisson" || w.kind == "trace";
  if (clamp_only) w.max_new_tokens = 0;
  if (absl::Status s = r.read_int("max_new_tokens", &w.max_new_tokens, clamp_only ? 0 : 1,
                                   model::kMaxPositions);
      !s.ok()) {
    return s;
  }
  absl::Status s;
  if (w.kind == "prompts") {
    if (r.has("file") == r.has("prompts")) {
      return r.table_error(
          "[workload] kind = \"prompts\" needs exactly one of file = \"...\" (one prompt per "
          "line) or prompts = [\"...\", ...]");
    }
    if (r.has("file")) {
      s = r.read_string("file", &w.prompts_file);
      if (!s.ok()) return s;
      w.prompts_file = resolve_path(base_dir, w.prompts_file);
      s = require_existing(r, "file", w.prompts_file, /*want_folder=*/false);
    } else {
      s = read_text_prompts(r, &w.prompts);
    }
  } else if (w.kind == "ids") {
    s = read_id_prompts(r, vocab_size, &w.prompt_ids);
  } else if (w.kind == "poisson") {
    if (!(s = r.read_int("num_requests", &w.num_requests, 1, kMaxWorkloadRequests)).ok()) return s;
    if (!(s = r.read_double("rate", &w.rate_per_s, "a number of requests per second > 0",
                            [](double v) { return std::isfinite(v) && v > 0; }))
             .ok()) {
      return s;
    }
    // The requests arrive over about num_requests / rate seconds; the engine takes arrivals
    // up to 10^7 s, so the mean span is held to a tenth of that (a Poisson overshoot of 10x
    // is out of reach at these counts).
    if (r.has("rate") && static_cast<double>(w.num_requests) / w.rate_per_s > 1e6) {
      return r.error("rate", sv_cat("expected at least ", static_cast<double>(w.num_requests) / 1e6,
                                    " requests per second for ", w.num_requests,
                                    " requests (arrivals must fall within 10^6 s), got ",
                                    w.rate_per_s));
    }
    if (!(s = r.read_int_range("input", &w.input_min, &w.input_max, 1, model::kMaxPositions)).ok()) return s;
    if (!(s = r.read_int_range("output", &w.output_min, &w.output_max, 1, model::kMaxPositions)).ok()) return s;
    s = r.read_seed("seed", &w.seed);
  } else {  // trace
    if (!r.has("file")) {
      return r.table_error("[workload] kind = \"trace\" needs file = \"requests.csv\"");
    }
    if (!(s = r.read_string("file", &w.trace_file)).ok()) return s;
    w.trace_file = resolve_path(base_dir, w.trace_file);
    if (!(s = require_existing(r, "file", w.trace_file, /*want_folder=*/false)).ok()) return s;
    if (!(s = r.read_double("time_scale", &w.time_scale, "a number >= 0",
                            [](double v) { return std::isfinite(v) && v >= 0; }))
             .ok()) {
      return s;
    }
    if (!(s = r.read_int("max_requests", &w.max_requests, 0, kMaxWorkloadRequests)).ok()) return s;
    if (!(s = r.read_int("max_prompt_tokens", &w.max_prompt_tokens, 0)).ok()) return s;
    s = r.read_seed("seed", &w.seed);
  }
  if (!s.ok()) return s;
  *out = std::move(w);
  return absl::OkStatus();
}

}  // namespace muflow::engine::topology::topology_detail
