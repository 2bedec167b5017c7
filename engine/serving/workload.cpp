#include "engine/serving/workload.hpp"

#include <algorithm>
#include <fstream>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "engine/serving/azure_trace.hpp"
#include "engine/splitmix64.hpp"
#include "engine/sv_cat.hpp"

namespace muflow::engine::serving {
namespace {

constexpr int32_t kFirstRandomId = 3;  // ids 0..2: unk / bos / eos in the usual vocabularies

// A text prompt and where it came from ("file:line" or "workload.prompts[i]").
struct TextPrompt {
  std::string text;
  std::string origin;
};

absl::Status check_ids(const std::vector<int32_t>& ids, int64_t vocab_size,
                       std::string_view origin) {
  for (size_t j = 0; j < ids.size(); ++j) {
    if (ids[j] < 0 || ids[j] >= vocab_size) {
      return absl::InvalidArgumentError(sv_cat(origin, ": position ", j, ": token id ", ids[j],
                                               " is outside the vocabulary [0, ", vocab_size,
                                               ")"));
    }
  }
  return absl::OkStatus();
}

std::vector<int32_t> random_ids(SplitMix64& rng, int64_t num_tokens, int64_t vocab_size) {
  std::vector<int32_t> ids(static_cast<size_t>(num_tokens));
  for (int32_t& id : ids) id = static_cast<int32_t>(rng.uniform_int(kFirstRandomId, vocab_size - 1));
  return ids;
}

int64_t clamp_to(int64_t value, int64_t limit) { return limit > 0 ? std::min(value, limit) : value; }

absl::StatusOr<std::vector<TextPrompt>> collect_text_prompts(const topology::WorkloadSpec& spec) {
  std::vector<TextPrompt> prompts;
  if (spec.prompts_file.empty()) {
    for (size_t i = 0; i < spec.prompts.size(); ++i) {
      if (!spec.prompts[i].empty()) {
        prompts.push_back({spec.prompts[i], sv_cat("workload.prompts[", i, "]")});
      }
    }
  } else {
    std::ifstream in(spec.prompts_file, std::ios::binary);
    if (!in) return absl::NotFoundError(sv_cat("cannot open prompts file '", spec.prompts_file, "'"));
    std::string line;
    for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
        line.pop_back();
      }
      if (line.empty()) continue;
      prompts.push_back({line, sv_cat(spec.prompts_file, ":", line_no)});
    }
  }
  if (prompts.empty()) {
    const std::string where = spec.prompts_file.empty() ? "workload.prompts" : spec.prompts_file;
    return absl::InvalidArgumentError(sv_cat(where, ": no prompts (every line is empty)"));
  }
  return prompts;
}

absl::Status add_text_prompts(const topology::WorkloadSpec& spec, int64_t vocab_size,
                              const EncodeFn& encode, std::vector<Request>* out) {
  if (!encode) {
    return absl::InvalidArgumentError(
        "workload kind \"prompts\" gives text, but the model has no tokenizer.model; give "
        "token ids (kind = \"ids\")");
  }
  absl::StatusOr<std::vector<TextPrompt>> prompts = collect_text_prompts(spec);
  if (!prompts.ok()) return prompts.status();
  for (TextPrompt& p : *prompts) {
    Request r;
    r.prompt = encode(p.text);
    if (r.prompt.empty()) {
      return absl::InvalidArgumentError(sv_cat(p.origin, ": prompt encodes to no tokens"));
    }
    if (absl::Status s = check_ids(r.prompt, vocab_size, p.origin); !s.ok()) return s;
    r.prompt_text = std::move(p.text);
    r.max_new_tokens = spec.max_new_tokens;
    out->push_back(std::move(r));
  }
  return absl::OkStatus();
}

absl::Status add_id_prompts(const topology::WorkloadSpec& spec, int64_t vocab_size,
                            std::vector<Request>* out) {
  if (spec.prompt_ids.empty()) {
    return absl::InvalidArgumentError("workload kind \"ids\" has no prompts");
  }
  for (size_t i = 0; i < spec.prompt_ids.size(); ++i) {
    const std::string origin = sv_cat("workload.prompts[", i, "]");
    if (spec.prompt_ids[i].empty()) return absl::InvalidArgumentError(sv_cat(origin, ": empty prompt"));
    if (absl::Status s = check_ids(spec.prompt_ids[i], vocab_size, origin); !s.ok()) return s;
    Request r;
    r.prompt = spec.prompt_ids[i];
    r.max_new_tokens = spec.max_new_tokens;
    out->push_back(std::move(r));
  }
  return absl::OkStatus();
}

absl::Status add_poisson(const topology::WorkloadSpec& spec, int64_t vocab_size,
                         std::vector<Request>* out) {
  if (spec.num_requests < 1 || !(spec.rate_per_s > 0) || spec.input_min < 1 ||
      spec.input_min > spec.input_max || spec.output_min < 1 || spec.output_min > spec.output_max) {
    return absl::InvalidArgumentError(sv_cat(
        "workload kind \"poisson\": expected num_requests >= 1, rate > 0 and 1 <= min <= max "
        "for input and output; got num_requests ", spec.num_requests, ", rate ", spec.rate_per_s,
        ", input [", spec.input_min, ", ", spec.input_max, "], output [", spec.output_min, ", ",
        spec.output_max, "]"));
  }
  SplitMix64 rng(spec.seed);
  const double mean_gap_s = 1.0 / spec.rate_per_s;
  double t = 0.0;
  for (int64_t i = 0; i < spec.num_requests; ++i) {
    t += rng.exponential(mean_gap_s);
    Request r;
    r.arrival_s = t;
    const int64_t num_input = rng.uniform_int(spec.input_min, spec.input_max);
    r.max_new_tokens = clamp_to(rng.uniform_int(spec.output_min, spec.output_max),
                                spec.max_new_tokens);
    r.prompt = random_ids(rng, num_input, vocab_size);
    out->push_back(std::move(r));
  }
  return absl::OkStatus();
}

absl::Status add_trace(const topology::WorkloadSpec& spec, int64_t vocab_size,
                       std::vector<Request>* out) {
  if (!(spec.time_scale >= 0)) {
    return absl::InvalidArgumentError(
        sv_cat("workload kind \"trace\": time_scale must be >= 0, got ", spec.time_scale));
  }
  absl::StatusOr<std::vector<TraceRow>> rows = read_azure_trace(spec.trace_file, spec.max_requests);
  if (!rows.ok()) return rows.status();
  SplitMix64 rng(spec.seed);
  for (const TraceRow& row : *rows) {
    Request r;
    r.arrival_s = row.arrival_s * spec.time_scale;
    r.prompt = random_ids(rng, clamp_to(row.context_tokens, spec.max_prompt_tokens), vocab_size);
    r.max_new_tokens = clamp_to(row.generated_tokens, spec.max_new_tokens);
    out->push_back(std::move(r));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<Request>> make_requests(const topology::WorkloadSpec& spec,
                                                   int64_t vocab_size, const EncodeFn& encode) {
  if (vocab_size < 1) {
    return absl::InvalidArgumentError(sv_cat("vocab_size must be positive, got ", vocab_size));
  }
  const bool random_prompts = spec.kind == "poisson" || spec.kind == "trace";
  if (random_prompts && vocab_size <= kFirstRandomId) {
    return absl::InvalidArgumentError(sv_cat("workload kind \"", spec.kind,
                                             "\" draws prompt ids from [3, vocab); vocab_size ",
                                             vocab_size, " is too small"));
  }
  if (!random_prompts && spec.max_new_tokens < 1) {
    return absl::InvalidArgumentError(sv_cat("workload kind \"", spec.kind,
                                             "\": max_new_tokens must be >= 1, got ",
                                             spec.max_new_tokens));
  }
  std::vector<Request> requests;
  absl::Status s;
  if (spec.kind == "prompts") {
    s = add_text_prompts(spec, vocab_size, encode, &requests);
  } else if (spec.kind == "ids") {
    s = add_id_prompts(spec, vocab_size, &requests);
  } else if (spec.kind == "poisson") {
    s = add_poisson(spec, vocab_size, &requests);
  } else if (spec.kind == "trace") {
    s = add_trace(spec, vocab_size, &requests);
  } else {
    s = absl::InvalidArgumentError(sv_cat("unknown workload kind '", spec.kind,
                                          "'; expected one of: prompts, ids, poisson, trace"));
  }
  if (!s.ok()) return s;
  std::stable_sort(requests.begin(), requests.end(),
                   [](const Request& a, const Request& b) { return a.arrival_s < b.arrival_s; });
  for (size_t i = 0; i < requests.size(); ++i) requests[i].id = static_cast<int64_t>(i);
  return requests;
}

}  // namespace muflow::engine::serving
