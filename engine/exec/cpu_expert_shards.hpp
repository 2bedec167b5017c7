#pragma once
/// \file
/// MoEShard's expert shards for the cpu backend: every expert of every block split over
/// `num_shards` devices by `moeshard_plan` (engine/planning/moeshard_plan.hpp) and prepacked, shard d
/// holding rows [begin_d, end_d) of gate and up and the same columns of down
/// (MoEShard §3.2: W_in split by columns, W_out by rows, in the paper's x·W orientation).

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_weights.hpp"
#include "engine/planning/moeshard_plan.hpp"
#include "kernels/cpu/expert_ffn.hpp"

namespace muflow::engine::exec {

/// Prepacked expert shards. Immutable after `prepare`; const methods may be called from any
/// thread (one instance is shared by the cpu executors of a run). Memory: one more copy of
/// the expert weights, in total, however many shards.
class CpuExpertShards {
 public:
  /// Splits every routed expert of `weights` (not the shared expert, which runs with
  /// attention) into `num_shards` shards. Errors: InvalidArgument when num_shards < 1 or an
  /// expert tensor's shape disagrees with the config. `bf16_compute`: as CpuModel::prepare.
  static absl::StatusOr<std::shared_ptr<const CpuExpertShards>> prepare(
      const model::ModelWeights& weights, int64_t num_shards,
      kernels::cpu::Bf16Compute bf16_compute = kernels::cpu::Bf16Compute::kAuto);

  int64_t num_shards() const { return static_cast<int64_t>(plan_.ranges.size()); }
  const planning::ShardPlan& plan() const { return plan_; }

  /// Partial output of shard `shard` of expert (block, expert): y[n, hidden] =
  /// down[:, r] · (silu(gate[r] x) ⊙ up[r] x) with r the shard's range; zeros for an empty
  /// shard. Σ over shards (in shard order) is the expert's output up to float rounding.
  /// x, y: [n, hidden] f32, not overlapping. Aborts (MUFLOW_ASSERT) on an index out of range.
  void forward(int64_t block, int64_t expert, int64_t shard, const float* x, int64_t n,
               float* y) const;

 private:
  CpuExpertShards() = default;

  int64_t hidden_ = 0;
  planning::ShardPlan plan_;
  /// [block][expert][shard]; null for an empty shard.
  std::vector<std::vector<std::vector<std::unique_ptr<kernels::cpu::ExpertFfn>>>> ffn_;
};

/// Rows [begin, end) of gate and up and columns [begin, end) of down of one expert, keeping
/// the dtype (exposed for tests). Precondition: 0 ≤ begin ≤ end ≤ ffn, shapes as in
/// ExpertWeights.
model::ExpertWeights slice_expert(const model::ExpertWeights& e, planning::ShardRange range);

}  // namespace muflow::engine::exec
