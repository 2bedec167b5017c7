#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "engine/splitmix64.hpp"
#include "engine/routing/router_replay.hpp"
#include "kernels/assert.hpp"

namespace muflow::engine::routing {
namespace {


constexpr int kFeistelRounds = 4;

int64_t floor_mod(int64_t a, int64_t m) {
  const int64_t r = a % m;
  return r < 0 ? r + m : r;
}

}  // namespace

std::string router_trace_path(const RouterSpec& spec, int64_t num_experts) {
  std::string path = spec.trace_file;
  if (path.empty()) {
    path = spec.kind == "replay-per-rank"
               ? "../shared/data/routing/switch-base-per-rank-bookcorpus.csv"
               : "../shared/data/routing/switch-base-{E}-bookcorpus.npy";
  }
  return absl::StrReplaceAll(path, {{"{E}", absl::StrCat(num_experts)}});
}

absl::StatusOr<std::unique_ptr<ReplayNpyRouter>> ReplayNpyRouter::load(
    const std::string& path, int64_t num_experts, int64_t num_topk, int64_t num_layers,
    uint64_t seed, int64_t tokens_per_request, bool shuffle) {
  auto invalid = [&](const std::string& msg) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", msg));
  };
  if (num_topk != 1) {
    return invalid(absl::StrFormat(
        "router replay-npy replays a top-1 trace; the model routes top-%d", num_topk));
  }
  if (tokens_per_request < 1) {
    return invalid(
        absl::StrFormat("replay_tokens_per_request must be >= 1, got %d", tokens_per_request));
  }
  absl::StatusOr<model::NpyInt64Array> trace = model::read_npy_i64(path);
  if (!trace.ok()) return trace.status();
  if (trace->shape.size() != 2 || trace->shape[0] < 1 || trace->shape[1] < 1) {
    std::string dims;
    for (int64_t d : trace->shape) absl::StrAppend(&dims, dims.empty() ? "" : ", ", d);
    return invalid(
        absl::StrCat("routing trace must be a non-empty 2-D [tokens, layers] array, "
                     "got shape (",
                     dims, ")"));
  }
  int64_t max_id = -1;
  for (int64_t i = 0; i < trace->num_values(); ++i) {
    const int64_t v = trace->data[static_cast<size_t>(i)];
    if (v < 0) {
      return invalid(absl::StrFormat("expert id %d at row %d, column %d is negative", v,
                                     i / trace->shape[1], i % trace->shape[1]));
    }
    max_id = std::max(max_id, v);
  }
  if (max_id >= num_experts) {  // an id the model does not have (any size, INT64_MAX too)
    return invalid(absl::StrFormat(
        "routing trace holds expert id %d, but the model has %d experts (ids 0 to %d)", max_id,
        num_experts, num_experts - 1));
  }
  if (max_id != num_experts - 1) {  // here max_id < num_experts, so max_id + 1 cannot overflow
    return invalid(absl::StrFormat(
        "routing trace holds expert ids up to %d (recorded with %d experts), but the model has "
        "%d experts",
        max_id, max_id + 1, num_experts));
  }
  return std::unique_ptr<ReplayNpyRouter>(new ReplayNpyRouter(
      num_experts, num_layers, path, *std::move(trace), seed, tokens_per_request, shuffle));
}

ReplayNpyRouter::ReplayNpyRouter(int64_t num_experts, int64_t num_layers, std::string path,
                                 model::NpyInt64Array trace, uint64_t seed,
                                 int64_t tokens_per_request, bool shuffle)
    : RouterModel(num_experts, 1, num_layers),
      path_(std::move(path)),
      trace_(std::move(trace)),
      seed_(seed),
      tokens_per_request_(tokens_per_request),
      shuffle_(shuffle) {
  // Smallest 2·h bits with 2^(2h) ≥ rows, so the Feistel domain is < 4·rows and cycle walking
  // takes fewer than 4 steps on average.
  while ((int64_t{1} << (2 * half_bits_)) < num_rows()) ++half_bits_;
  block_keys_.resize(static_cast<size_t>(num_layers));
  for (int64_t b = 0; b < num_layers; ++b) {
    block_keys_[static_cast<size_t>(b)] =
        splitmix64_mix(seed ^ splitmix64_mix(0x7265706C6179ull + static_cast<uint64_t>(b)));
  }
}

int64_t ReplayNpyRouter::trace_token(int64_t request_id, int64_t position) const {
  const int64_t n = num_rows();
  const __int128 t =
      static_cast<__int128>(floor_mod(request_id, n)) * floor_mod(tokens_per_request_, n) +
      floor_mod(position, n);
  return static_cast<int64_t>(t % n);
}

int64_t ReplayNpyRouter::trace_row(int32_t block, int64_t token) const {
  MUFLOW_ASSERT(block >= 0 && block < num_layers(), "block out of range");
  MUFLOW_ASSERT(token >= 0 && token < num_rows(), "trace token out of range");
  if (!shuffle_) return token;
  const uint64_t key = block_keys_[static_cast<size_t>(block)];
  const uint64_t mask = (uint64_t{1} << half_bits_) - 1;
  uint64_t x = static_cast<uint64_t>(token);
  do {  // cycle walking: the permutation of the larger domain, repeated until inside [0, n)
    uint64_t left = x >> half_bits_;
    uint64_t right = x & mask;
    for (int round = 0; round < kFeistelRounds; ++round) {
      const uint64_t f = splitmix64_mix(key ^ (static_cast<uint64_t>(round) << 56) ^ right) & mask;
      const uint64_t next_right = left ^ f;
      left = right;
      right = next_right;
    }
    x = (left << half_bits_) | right;
  } while (x >= static_cast<uint64_t>(num_rows()));
  return static_cast<int64_t>(x);
}

int32_t ReplayNpyRouter::expert(int32_t block, int64_t request_id, int64_t position) const {
  const int64_t row = trace_row(block, trace_token(request_id, position));
  const int64_t col = block % num_columns();
  return static_cast<int32_t>(trace_.data[static_cast<size_t>(row * num_columns() + col)]);
}

void ReplayNpyRouter::route(int32_t block, int64_t request_id, int64_t position,
                            int32_t* expert_ids, float* weights) const {
  expert_ids[0] = expert(block, request_id, position);
  weights[0] = 1.0f;
}

std::string ReplayNpyRouter::describe() const {
  return absl::StrFormat("replay-npy(%s, %d tokens x %d layers, E=%d, P=%d, shuffle=%s, seed=%d)",
                         path_, num_rows(), num_columns(), num_experts(), tokens_per_request_,
                         shuffle_ ? "on" : "off", seed_);
}

}  // namespace muflow::engine::routing
