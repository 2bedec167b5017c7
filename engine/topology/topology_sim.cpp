// Topology sections of the sim backend: [router], [network], and device kinds per backend.
// Format reference: topologies/README.md.

#include <cmath>

#include "engine/sv_cat.hpp"
#include "engine/topology/topology_sections.hpp"
#include "kernels/sim/device_kind.hpp"

namespace muflow::engine::topology::topology_detail {
namespace {

constexpr std::string_view kRouterKeys[] = {"kind",      "seed",        "skew",
                                            "skew_mode", "hot_experts", "alpha",
                                            "exp_rate",  "file",        "tokens_per_request"};
constexpr std::string_view kSkewModes[] = {"code", "share"};
constexpr std::string_view kNetworkKeys[] = {"intra_node",       "inter_node", "host_link",
                                             "activation_bytes", "a2a_order",  "model"};

constexpr std::string_view kCostKeys[] = {"stage_overhead_us",
                                          "scheduler_overhead_us",
                                          "attention_overhead_us",
                                          "expert_overhead_us",
                                          "kinds",
                                          "expert_ffn",
                                          "kernels",
                                          "spread_seed"};
constexpr std::string_view kOverheadKeys[] = {"stage_overhead_us", "scheduler_overhead_us",
                                              "attention_overhead_us", "expert_overhead_us"};
constexpr std::string_view kCalibrationKeys[] = {"file", "kind",     "hidden",
                                                 "ffn",  "ffn_kind", "dtype"};
constexpr std::string_view kFfnKinds[] = {"two-layer", "swiglu"};
constexpr std::string_view kCalibrationDtypes[] = {"f32", "bf16"};
/// Bound on an overhead (1 s): larger is a unit mistake (the keys are microseconds).
constexpr double kMaxOverheadUs = 1e6;

absl::Status read_overheads(const TomlTableReader& r, StepOverheads* out) {
  const auto in_range = [](double v) { return std::isfinite(v) && v >= 0 && v <= kMaxOverheadUs; };
  if (absl::Status s =
          r.read_double("stage_overhead_us", &out->stage_us, "microseconds in [0, 1e6]", in_range);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = r.read_double("scheduler_overhead_us", &out->scheduler_us,
                                     "microseconds in [0, 1e6]", in_range);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = r.read_double("attention_overhead_us", &out->attention_us,
                                     "microseconds in [0, 1e6]", in_range);
      !s.ok()) {
    return s;
  }
  return r.read_double("expert_overhead_us", &out->expert_us, "microseconds in [0, 1e6]", in_range);
}

}  // namespace

absl::Status parse_cost_table(const TomlTableReader& r, const std::filesystem::path& base_dir,
                              CostSpec* out) {
  if (absl::Status s = r.check_keys(kCostKeys); !s.ok()) return s;
  if (absl::Status s = read_overheads(r, &out->overheads); !s.ok()) return s;
  const toml::table* kinds = nullptr;
  if (absl::Status s = r.read_table("kinds", &kinds); !s.ok()) return s;
  if (kinds != nullptr) {
    const TomlTableReader kr(*kinds, r.source(), r.dotted("kinds"));
    for (const auto& [key, node] : *kinds) {
      const std::string name(key.str());
      if (absl::StatusOr<kernels::sim::DeviceKind> k = kernels::sim::find_device_kind(name);
          !k.ok()) {
        return kr.error(name, std::string(k.status().message()));
      }
      const toml::table* kt = nullptr;
      if (absl::Status s = kr.read_table(name, &kt); !s.ok()) return s;
      const TomlTableReader one(*kt, r.source(), kr.dotted(name));
      if (absl::Status s = one.check_keys(kOverheadKeys); !s.ok()) return s;
      StepOverheads o = out->overheads;  // keys left out keep the [cost] values
      if (absl::Status s = read_overheads(one, &o); !s.ok()) return s;
      out->kinds[name] = o;
    }
  }
  if (r.has("kernels")) {
    if (absl::Status s = r.read_string("kernels", &out->kernels); !s.ok()) return s;
    out->kernels = resolve_path(base_dir, out->kernels);
    out->kernels_where = sv_cat(r.source(), ":", r.line_of("kernels"));
    if (absl::Status s = require_existing(r, "kernels", out->kernels, false); !s.ok()) return s;
  }
  if (absl::Status s = r.read_seed("spread_seed", &out->spread_seed); !s.ok()) return s;
  const toml::table* cal = nullptr;
  if (absl::Status s = r.read_table("expert_ffn", &cal); !s.ok()) return s;
  if (cal != nullptr) {
    const TomlTableReader c(*cal, r.source(), r.dotted("expert_ffn"));
    if (absl::Status s = c.check_keys(kCalibrationKeys); !s.ok()) return s;
    if (!c.has("file")) return c.table_error("[cost.expert_ffn] needs file = \"...\" (a CSV)");
    ExpertFfnCalibration e;
    if (absl::Status s = c.read_string("file", &e.file); !s.ok()) return s;
    e.file = resolve_path(base_dir, e.file);
    e.where = sv_cat(c.source(), ":", c.line_of("file"));
    if (absl::Status s = require_existing(c, "file", e.file, false); !s.ok()) return s;
    if (absl::Status s = c.read_string("kind", &e.kind); !s.ok()) return s;
    if (absl::StatusOr<kernels::sim::DeviceKind> k = kernels::sim::find_device_kind(e.kind);
        !k.ok()) {
      return c.error("kind", std::string(k.status().message()));
    }
    if (absl::Status s = c.read_int("hidden", &e.hidden, 1, 1 << 20); !s.ok()) return s;
    if (absl::Status s = c.read_int("ffn", &e.ffn, 1, 1 << 22); !s.ok()) return s;
    if (absl::Status s = c.read_choice("ffn_kind", &e.ffn_kind, kFfnKinds); !s.ok()) return s;
    if (absl::Status s = c.read_choice("dtype", &e.dtype, kCalibrationDtypes); !s.ok()) return s;
    out->expert_ffn = std::move(e);
  }
  return absl::OkStatus();
}

absl::Status check_device_kind(const TomlTableReader& reader, std::string_view key,
                               const std::string& backend, const std::string& kind) {
  if (backend == "cuda") {
    if (kind == "cuda") return absl::OkStatus();
    return reader.error(key, sv_cat("backend 'cuda' runs devices of kind 'cuda' only (each a "
                                    "virtual device on one of the process's GPUs); got '",
                                    kind, "'"));
  }
  if (backend == "cpu") {
    if (kind == "cpu") return absl::OkStatus();
    return reader.error(key, sv_cat("backend 'cpu' runs devices of kind 'cpu' only; got '", kind,
                                    "' (simulated GPUs need backend = \"sim\")"));
  }
  absl::StatusOr<kernels::sim::DeviceKind> found = kernels::sim::find_device_kind(kind);
  if (!found.ok()) return reader.error(key, std::string(found.status().message()));
  return absl::OkStatus();
}

absl::Status parse_router_table(const TomlTableReader& r, const std::filesystem::path& base_dir,
                                routing::RouterSpec* out) {
  if (absl::Status s = r.check_keys(kRouterKeys); !s.ok()) return s;
  std::vector<std::string> names = routing::router_kind_names();
  std::vector<std::string_view> kinds(names.begin(), names.end());
  if (absl::Status s = r.read_choice("kind", &out->kind, kinds); !s.ok()) return s;
  if (absl::Status s = r.read_seed("seed", &out->seed); !s.ok()) return s;
  if (absl::Status s = r.read_double("skew", &out->skew, "a fraction in [0, 1]",
                                     [](double v) { return v >= 0 && v <= 1; });
      !s.ok()) {
    return s;
  }
  if (absl::Status s = r.read_choice("skew_mode", &out->skew_mode, kSkewModes); !s.ok()) {
    return s;
  }
  if (absl::Status s = r.read_int("hot_experts", &out->hot_experts, 0); !s.ok()) return s;
  if (absl::Status s = r.read_double("alpha", &out->alpha, "a number >= 0",
                                     [](double v) { return std::isfinite(v) && v >= 0; });
      !s.ok()) {
    return s;
  }
  if (absl::Status s = r.read_double("exp_rate", &out->exp_rate, "a number > 0",
                                     [](double v) { return std::isfinite(v) && v > 0; });
      !s.ok()) {
    return s;
  }
  if (absl::Status s = r.read_int("tokens_per_request", &out->replay_tokens_per_request, 1);
      !s.ok()) {
    return s;
  }
  if (r.has("file")) {
    std::string file;
    if (absl::Status s = r.read_string("file", &file); !s.ok()) return s;
    out->trace_file = resolve_path(base_dir, file);
    if (absl::Status s = require_existing(r, "file", out->trace_file, false); !s.ok()) return s;
  }
  const bool replay = out->kind.rfind("replay", 0) == 0 || out->kind == "recorded";
  if (replay && out->trace_file.empty()) {
    return r.table_error(sv_cat("[router] kind = \"", out->kind, "\" needs file = \"...\""));
  }
  return absl::OkStatus();
}

absl::Status parse_network_table(const TomlTableReader& r, NetworkSpec* out) {
  if (absl::Status s = r.check_keys(kNetworkKeys); !s.ok()) return s;
  for (std::string_view key : {"intra_node", "inter_node", "host_link"}) {
    if (!r.has(key)) continue;
    std::string* field = key == "intra_node"   ? &out->intra_node
                         : key == "inter_node" ? &out->inter_node
                                               : &out->host_link;
    if (absl::Status s = r.read_string(key, field); !s.ok()) return s;
    out->where[std::string(key)] = sv_cat(r.source(), ":", r.line_of(key));
  }
  if (absl::Status s = r.read_int("activation_bytes", &out->activation_bytes, 1); !s.ok()) {
    return s;
  }
  if (absl::Status s = r.read_choice("a2a_order", &out->a2a_order, kKnownA2aOrders); !s.ok()) {
    return s;
  }
  return r.read_choice("model", &out->model, kKnownNetworkModels);
}

}  // namespace muflow::engine::topology::topology_detail
