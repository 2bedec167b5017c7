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

// Checks a Poisson workload's parameters (before any request is generated).
absl::Status check_poisson(const topology::WorkloadSpec& spec) {
  if (spec.num_requests < 1 || !(spec.rate_per_s > 0) || spec.input_min < 1 ||
      spec.input_min > spec.input_max || spec.output_min < 1 || spec.output_min > spec.output_max) {
    return absl::InvalidArgumentError(sv_cat(
        "workload kind \"poisson\": expected num_requests >= 1, rate > 0 and 1 <= min <= max "
        "for input and output; got num_requests ", spec.num_requests, ", rate ", spec.rate_per_s,
        ", input [", spec.input_min, ", ", spec.input_max, "], output [", spec.output_min, ", ",
        spec.output_max, "]"));
  }
  return absl::OkStatus();
}

// Poisson arrivals, each request generated when taken: O(1) memory whatever num_requests is.
// Draws per request, in order: gap, input length, output length, prompt ids (one SplitMix64
// stream over the whole workload).
class PoissonSource final : public RequestSource {
 public:
  PoissonSource(const topology::WorkloadSpec& spec, int64_t vocab_size)
      : spec_(spec), vocab_size_(vocab_size), rng_(spec.seed), mean_gap_s_(1.0 / spec.rate_per_s) {}
  int64_t remaining() const override { return spec_.num_requests - next_id_; }
  std::optional<Request> next() override {
    if (next_id_ >= spec_.num_requests) return std::nullopt;
    t_ += rng_.exponential(mean_gap_s_);
    Request r;
    r.id = next_id_++;
    r.arrival_s = t_;
    const int64_t num_input = rng_.uniform_int(spec_.input_min, spec_.input_max);
    r.max_new_tokens =
        clamp_to(rng_.uniform_int(spec_.output_min, spec_.output_max), spec_.max_new_tokens);
    r.prompt = random_ids(rng_, num_input, vocab_size_);
    return r;
  }

 private:
  topology::WorkloadSpec spec_;
  int64_t vocab_size_;
  SplitMix64 rng_;
  double mean_gap_s_;
  double t_ = 0.0;
  int64_t next_id_ = 0;
};

// A trace's rows in arrival order (by scaled arrival, stable), each request's prompt generated when taken. The
// prompt ids of row i are draws d_i .. d_i + len_i - 1 of one SplitMix64(seed) stream in file
// order (d_i: the prompt lengths of the rows before it), so generating rows out of file order
// gives the same prompts as generating them in file order. Memory: 48 bytes per row (the
// 32-byte TraceRow, its first draw, its place in the arrival order).
class TraceSource final : public RequestSource {
 public:
  TraceSource(std::vector<TraceRow> rows, const topology::WorkloadSpec& spec, int64_t vocab_size)
      : rows_(std::move(rows)), seed_(spec.seed), time_scale_(spec.time_scale),
        max_prompt_tokens_(spec.max_prompt_tokens), max_new_tokens_(spec.max_new_tokens),
        vocab_size_(vocab_size) {
    first_draw_.resize(rows_.size());
    uint64_t draws = 0;
    for (size_t i = 0; i < rows_.size(); ++i) {
      first_draw_[i] = draws;
      draws += static_cast<uint64_t>(clamp_to(rows_[i].context_tokens, max_prompt_tokens_));
    }
    order_.resize(rows_.size());
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int64_t>(i);
    std::stable_sort(order_.begin(), order_.end(), [this](int64_t a, int64_t b) {
      return rows_[a].arrival_s * time_scale_ < rows_[b].arrival_s * time_scale_;
    });
  }
  int64_t remaining() const override { return static_cast<int64_t>(order_.size()) - next_id_; }
  std::optional<Request> next() override {
    if (next_id_ >= static_cast<int64_t>(order_.size())) return std::nullopt;
    const auto i = static_cast<size_t>(order_[next_id_]);
    const TraceRow& row = rows_[i];
    SplitMix64 rng(seed_);
    rng.discard(first_draw_[i]);
    Request r;
    r.id = next_id_++;
    r.arrival_s = row.arrival_s * time_scale_;
    r.prompt = random_ids(rng, clamp_to(row.context_tokens, max_prompt_tokens_), vocab_size_);
    r.max_new_tokens = clamp_to(row.generated_tokens, max_new_tokens_);
    return r;
  }

 private:
  std::vector<TraceRow> rows_;
  std::vector<uint64_t> first_draw_;  // [row] draws of the stream before this row's prompt
  std::vector<int64_t> order_;        // rows by (arrival, file order)
  uint64_t seed_;
  double time_scale_;
  int64_t max_prompt_tokens_, max_new_tokens_, vocab_size_;
  int64_t next_id_ = 0;
};

absl::StatusOr<RequestSourcePtr> make_trace_source(const topology::WorkloadSpec& spec,
                                                   int64_t vocab_size) {
  if (!(spec.time_scale >= 0)) {
    return absl::InvalidArgumentError(
        sv_cat("workload kind \"trace\": time_scale must be >= 0, got ", spec.time_scale));
  }
  absl::StatusOr<std::vector<TraceRow>> rows = read_azure_trace(spec.trace_file, spec.max_requests);
  if (!rows.ok()) return rows.status();
  return std::make_shared<TraceSource>(std::move(*rows), spec, vocab_size);
}

// Prompts given in full (text or ids): few, built at once; sorted and numbered.
RequestSourcePtr vector_source(std::vector<Request> requests) {
  for (size_t i = 0; i < requests.size(); ++i) requests[i].id = static_cast<int64_t>(i);
  return make_vector_source(std::move(requests));
}

}  // namespace

absl::StatusOr<RequestSourcePtr> make_request_source(const topology::WorkloadSpec& spec,
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
  if (spec.kind == "prompts") {
    if (absl::Status s = add_text_prompts(spec, vocab_size, encode, &requests); !s.ok()) return s;
    return vector_source(std::move(requests));
  }
  if (spec.kind == "ids") {
    if (absl::Status s = add_id_prompts(spec, vocab_size, &requests); !s.ok()) return s;
    return vector_source(std::move(requests));
  }
  if (spec.kind == "poisson") {
    if (absl::Status s = check_poisson(spec); !s.ok()) return s;
    return std::make_shared<PoissonSource>(spec, vocab_size);
  }
  if (spec.kind == "trace") return make_trace_source(spec, vocab_size);
  return absl::InvalidArgumentError(sv_cat("unknown workload kind '", spec.kind,
                                           "'; expected one of: prompts, ids, poisson, trace"));
}

absl::StatusOr<std::vector<Request>> make_requests(const topology::WorkloadSpec& spec,
                                                   int64_t vocab_size, const EncodeFn& encode) {
  absl::StatusOr<RequestSourcePtr> source = make_request_source(spec, vocab_size, encode);
  if (!source.ok()) return source.status();
  // A source is lazy and may hold any number (a WorkloadSpec built in code is not bounded by
  // the topology parser); a list is not: bound it before allocating.
  if ((*source)->remaining() > topology::kMaxWorkloadRequests) {
    return absl::InvalidArgumentError(
        sv_cat("workload of ", (*source)->remaining(), " requests: a list holds at most ",
               topology::kMaxWorkloadRequests, "; serve it from make_request_source instead"));
  }
  std::vector<Request> requests;
  requests.reserve(static_cast<size_t>((*source)->remaining()));
  while (std::optional<Request> r = (*source)->next()) requests.push_back(std::move(*r));
  return requests;
}

}  // namespace muflow::engine::serving
