#pragma once
/// \file
/// Routers that replay real routing: HarMoEny's Switch-base BookCorpus traces in
/// `../shared/data/routing/` (see its README for provenance and caveats).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/npy_reader.hpp"
#include "engine/routing/router_model.hpp"

namespace muflow::engine::routing {

/// The trace path a spec names: `spec.trace_file` with `{E}` replaced by num_experts, or
/// when empty the shared data's default for the kind (replay-npy:
/// `../shared/data/routing/switch-base-{E}-bookcorpus.npy`; replay-per-rank:
/// `../shared/data/routing/switch-base-per-rank-bookcorpus.csv`).
std::string router_trace_path(const RouterSpec& spec, int64_t num_experts);

/// `replay-npy`: replays a `[num_rows, num_columns]` int64 trace of top-1 expert ids (the
/// Switch files: 40,800 tokens × 6 encoder layers, 680 samples × 60 tokens).
///
/// Mapping (independent of batching, order and wiring):
///   trace token t = (request_id · P + position) mod num_rows, P = replay_tokens_per_request
///     (default 60, the trace's sample length: requests 0..679 with positions 0..59 visit
///     every trace token exactly once);
///   column c = block mod num_columns;
///   row = π_block(t) with replay_shuffle (default), else t;
///   expert = trace[row, c], weight 1.
/// π_block is a seeded bijection of [0, num_rows) per block: a 4-round Feistel network on the
/// smallest even-bit power-of-two domain ≥ num_rows with cycle walking (Black & Rogaway,
/// "Ciphers with arbitrary finite domains", CT-RSA 2002), round keys from splitmix64(seed,
/// block). It is needed because each column of the Switch files is sorted (rebuilt from
/// per-rank counts), so unshuffled consecutive tokens would all pick the same expert, and
/// every column shares the same row order, which would fake inter-layer affinity. Because π
/// is a bijection, the per-block loads of any set of tokens that covers each t once equal the
/// file's per-column histogram exactly.
/// Immutable after load; route() is thread-safe.
class ReplayNpyRouter final : public RouterModel {
 public:
  /// Loads `path` (read_npy_i64) for a model with `num_experts` experts, top-`num_topk`,
  /// `num_layers` blocks.
  /// Errors (messages name the file): those of read_npy_i64; InvalidArgument when the array
  /// is not 2-D with ≥ 1 row and column, holds an id < 0, its largest id is not
  /// num_experts − 1 (the trace was recorded for another expert count), num_topk ≠ 1 (the
  /// trace is top-1), or tokens_per_request < 1.
  static absl::StatusOr<std::unique_ptr<ReplayNpyRouter>> load(
      const std::string& path, int64_t num_experts, int64_t num_topk, int64_t num_layers,
      uint64_t seed, int64_t tokens_per_request, bool shuffle);

  void route(int32_t block, int64_t request_id, int64_t position, int32_t* expert_ids,
             float* weights) const override;
  std::string describe() const override;

  /// t = (request_id · P + position) mod num_rows (non-negative for any inputs).
  int64_t trace_token(int64_t request_id, int64_t position) const;
  /// The row of column `block mod num_columns` that block `block` reads for trace token t.
  int64_t trace_row(int32_t block, int64_t token) const;
  /// The expert the trace assigns to (block, request_id, position).
  int32_t expert(int32_t block, int64_t request_id, int64_t position) const;

  int64_t num_rows() const { return trace_.shape[0]; }
  int64_t num_columns() const { return trace_.shape[1]; }
  const model::NpyInt64Array& trace() const { return trace_; }

 private:
  ReplayNpyRouter(int64_t num_experts, int64_t num_layers, std::string path,
                  model::NpyInt64Array trace, uint64_t seed, int64_t tokens_per_request,
                  bool shuffle);

  std::string path_;
  model::NpyInt64Array trace_;
  uint64_t seed_;
  int64_t tokens_per_request_;
  bool shuffle_;
  int half_bits_ = 1;                 ///< Feistel half width
  std::vector<uint64_t> block_keys_;  ///< one Feistel key per block
};

/// HarMoEny's per-rank routing counts (`switch-base-per-rank-bookcorpus.csv`, columns
/// model,num_experts,world_size,layer,iteration,src_rank,tokens_sent,expert_counts): how many
/// of each source rank's tokens chose each expert, per layer and iteration. Value type.
struct PerRankRoutingCounts {
  std::string model;  ///< e.g. "google/switch-base-128"
  int64_t num_experts = 0;
  int64_t num_ranks = 0;       ///< world_size
  int64_t num_layers = 0;      ///< 1 + largest layer index (Switch: 12; 0–5 encoder)
  int64_t num_iterations = 0;  ///< 1 + largest iteration
  /// counts[((rank · num_layers + layer) · num_iterations + iteration) · num_experts + expert]
  std::vector<int64_t> counts;
  /// tokens_sent[(rank · num_layers + layer) · num_iterations + iteration] (= the row's sum)
  std::vector<int64_t> tokens_sent;

  /// counts[rank][layer][iteration][expert] (indices must be in range; asserts).
  int64_t count(int64_t rank, int64_t layer, int64_t iteration, int64_t expert) const;
  /// Tokens rank `rank` routed in (layer, iteration).
  int64_t tokens(int64_t rank, int64_t layer, int64_t iteration) const;
  /// Per-expert totals of `layer` summed over ranks, for one iteration or all (iteration -1).
  std::vector<int64_t> layer_histogram(int64_t layer, int64_t iteration = -1) const;
};

/// Loads the rows of `path` whose num_experts equals `num_experts`.
/// Errors (`path:line: ...`): NotFound when the file cannot be opened or has no rows for
/// num_experts (the message lists the counts it has); InvalidArgument for a missing column,
/// a non-integer field, an expert_counts list whose length is not num_experts, counts that do
/// not sum to tokens_sent, negative values, a src_rank ≥ world_size, a world_size or model
/// that changes between rows, or a (rank, layer, iteration) that is duplicated or missing.
absl::StatusOr<PerRankRoutingCounts> load_per_rank_routing_csv(const std::string& path,
                                                               int64_t num_experts);

/// `replay-per-rank`: each token's experts are drawn from the real per-layer distribution
///   p_l(e) = Σ_rank Σ_iteration counts[rank][l][iteration][e] / Σ(all of layer l),
/// l = block mod trace_layers (aggregated over both ranks and iterations: 81,600 tokens per
/// Switch encoder layer), first expert by inverse CDF, the other k−1 without replacement
/// (TopkSampler; experts the trace never chose get probability 0). Unlike replay-npy it has
/// no token identity at all, only the per-layer load. Errors: those of the loader, and
/// InvalidArgument when trace_layers ∉ [1, counts.num_layers] or a used layer has no tokens.
absl::StatusOr<std::unique_ptr<RouterModel>> make_per_rank_router(
    const PerRankRoutingCounts& counts, const std::string& path, int64_t num_topk,
    int64_t num_layers, uint64_t seed, int64_t trace_layers);

}  // namespace muflow::engine::routing
