#pragma once
/// \file
/// The receptor's token pool (AsyncMoE §3.2): holds each token of one attention DP rank until
/// its residual row and all of its top-k expert outputs for a block have arrived, then merges
/// them in top-k rank order (never arrival order), so the sum is bitwise the same whatever
/// wiring delivered the parts.

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/token_batch.hpp"

namespace muflow::engine {

/// Merged tokens of one iteration: `tokens[i]` ↔ row i of `h` [n, hidden].
struct MergedTokens {
  int64_t iteration = 0;
  std::vector<TokenMeta> tokens;  ///< sorted by (request_id, position); meta of the residual
  std::vector<float> h;           ///< residual + Σ_j w_j y_j (+ shared), [n, hidden]
};

/// Token pool of one merge point (attention stage of block b+1, or the sampler), for one DP
/// rank. Inputs per iteration: one residual batch (rows `[h_mid | shared]`, width hidden or
/// 2·hidden) and `expected_expert_messages` batches of expert outputs (rows carry topk_rank
/// and topk_weight). Owned by one stage actor; not thread-safe.
class TokenPool {
 public:
  TokenPool(int64_t hidden, int64_t num_topk, int64_t expected_expert_messages);

  /// Adds a residual batch (one per iteration). Errors: InvalidArgument on a row width that is
  /// neither hidden nor 2·hidden, or a token that was already added.
  absl::Status add_residual(const TokenBatch& batch);
  /// Adds expert outputs (width hidden). Errors: InvalidArgument on a bad width, a top-k rank
  /// out of range, or the same (token, rank) twice.
  absl::Status add_expert_outputs(const TokenBatch& batch);

  /// The earliest iteration whose residual and all expected expert messages have arrived, or
  /// -1 when none has.
  int64_t complete_iteration() const;
  /// Number of tokens of an iteration held (0 if unknown).
  int64_t num_tokens(int64_t iteration) const;

  /// Removes and merges one complete iteration. Errors: FailedPrecondition if the iteration is
  /// incomplete, or a token lacks one of its top-k outputs (a dropped token).
  absl::StatusOr<MergedTokens> take(int64_t iteration);

 private:
  struct Entry {
    TokenMeta meta;
    std::vector<float> residual;  ///< [hidden]
    std::vector<float> shared;    ///< [hidden] or empty
    std::vector<float> outputs;   ///< [num_topk * hidden], slot j valid when bit j of arrived
    std::vector<float> weights;   ///< [num_topk]
    uint64_t arrived = 0;         ///< bit j: top-k rank j arrived (num_topk <= 64)
    int64_t num_outputs = 0;
    bool has_residual = false;
  };
  struct Iteration {
    bool residual_arrived = false;
    int64_t expert_messages = 0;
    std::map<std::pair<int64_t, int64_t>, Entry> entries;  ///< (request, position) → entry
  };
  Entry& entry(Iteration& it, int64_t request_id, int64_t position);

  int64_t hidden_, num_topk_, expected_expert_messages_;
  std::map<int64_t, Iteration> iterations_;
};

}  // namespace muflow::engine
