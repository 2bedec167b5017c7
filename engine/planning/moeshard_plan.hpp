#pragma once
/// \file
/// MoEShard's tensor-sharding plan (Balmau et al., EuroMLSys 2025, §3.2 and Algorithm 1):
/// every expert is split across all devices. In HF layout (gate/up `[ffn, hidden]`, down
/// `[hidden, ffn]`) device d holds the rows [begin_d, end_d) of gate and up (the paper's
/// column split of W_in) and the same columns of down (the paper's row split of W_out), so
///   y = Σ_d down[:, begin_d:end_d] · (silu(gate[begin_d:end_d] x) ⊙ up[begin_d:end_d] x)
/// and the partial outputs are summed (reduce-scatter) at each token's origin.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace muflow::engine::planning {

/// The FFN slice [begin, end) one device holds (end - begin may be 0).
struct ShardRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

/// One expert's split over `num_devices` devices: contiguous, in device order, covering
/// [0, ffn) exactly once.
struct ShardPlan {
  int64_t ffn = 0;
  std::vector<ShardRange> ranges;  ///< [num_devices]
};

/// Splits `ffn` intermediate units over `num_devices` devices: ⌊ffn / D⌋ each and the
/// remainder, one unit each, to the first devices (as MoEShard's public code does; the paper
/// assumes divisibility). When ffn < D the last devices hold empty shards. Pure.
/// Errors: InvalidArgument when ffn < 1 or num_devices < 1.
absl::StatusOr<ShardPlan> moeshard_plan(int64_t ffn, int64_t num_devices);

}  // namespace muflow::engine::planning
