#pragma once
/// \file
/// The sim backend's executor: no math. Attention stages route tokens with a RouterModel;
/// every stage's duration comes from the roofline cost model of its device kind
/// (kernels/sim), or from kernel times measured on that hardware (`[cost] kernels`,
/// kernels/sim/measured_kernels.hpp) when given. Token batches carry metadata only
/// (activation width 0).

#include <memory>

#include "engine/exec/device_activity.hpp"
#include "engine/exec/executor.hpp"
#include "engine/model/model_config.hpp"
#include "engine/routing/router_model.hpp"
#include "kernels/sim/cost_model.hpp"
#include "kernels/sim/device_kind.hpp"
#include "kernels/sim/measured_kernels.hpp"

namespace muflow::engine::exec {

/// Models one simulated device. Deterministic: durations depend only on the batch's token
/// counts and context lengths; expert choices only on (router seed, request, position, block);
/// generated token ids on (sampling seed, request, position) and are never EOS, so requests
/// run to their workload's output length. Prompt logits are not available in simulation.
class SimExecutor final : public Executor {
 public:
  SimExecutor(const model::ModelConfig& config, kernels::sim::DeviceKind kind,
              std::shared_ptr<const kernels::sim::CostModel> cost,
              std::shared_ptr<const routing::RouterModel> router, kernels::sim::Precision precision,
              std::shared_ptr<const kernels::sim::MeasuredKernels> measured = nullptr,
              std::shared_ptr<DeviceActivity> activity = nullptr, int64_t device = 0);

  int64_t activation_width() const override { return 0; }
  bool virtual_time() const override { return true; }
  void embed(const std::vector<dataflow::TokenMeta>& tokens, float* h) override {}
  absl::Status attention(int64_t block, serving::KvCache& kv,
                         const std::vector<dataflow::TokenMeta>& tokens, float* h,
                         const AttentionResult& out, double* seconds) override;
  void expert(int64_t block, int64_t expert, const float* x, int64_t n, float* y,
              double* seconds) override;
  void expert_shard(int64_t block, int64_t expert, int64_t shard, int64_t num_shards,
                    const float* x, int64_t n, float* y, double* seconds) override;
  void sample(const std::vector<dataflow::TokenMeta>& rows, const float* h,
              const std::vector<topology::SamplingSpec>& sampling, std::vector<int32_t>* tokens,
              std::vector<std::vector<float>>* logits, double* seconds) override;
  /// The measured in-run host time (`[cost] kernels`' host_* rows); 0 on the roofline.
  double stage_host_seconds(dataflow::StageKind kind, int64_t num_tokens) const override;
  /// The measured run spread (`[cost] kernels`' `# spread_*` metadata); 0 on the roofline.
  double run_spread(dataflow::StageKind kind) const override;
  double barrier_host_seconds(bool dispatch, int64_t rows) const override;
  /// The measured host_grant row; 0 without one (and on the roofline).
  double grant_host_seconds() const override;
  /// Records this device (`device`) busy or idle in the run's DeviceActivity, if any, at
  /// `now_s` (its shared runs move: DeviceActivity::set_busy).
  void set_device_busy(bool busy, double now_s) override;
  /// The measured expert calls' contended work since the last take (device_activity.hpp).
  DeviceActivity::SharedWork take_shared_work() override;
  DeviceActivity* activity() override { return activity_.get(); }

  const kernels::sim::DeviceKind& kind() const { return kind_; }

 private:
  double seconds_for(const kernels::sim::OpCost& cost, int64_t num_tokens) const;
  /// Measured expert time at width `ffn` on `n` rows with this node's other devices as busy
  /// as they are now (MeasuredKernels::expert_seconds' `busy_share`); adds the call to the
  /// contended work take_shared_work returns where the time depends on the peers.
  double measured_expert_seconds(int64_t n, int64_t ffn);

  model::ModelConfig config_;
  kernels::sim::DeviceKind kind_;
  std::shared_ptr<const kernels::sim::CostModel> cost_;
  std::shared_ptr<const routing::RouterModel> router_;
  kernels::sim::Precision precision_;
  std::shared_ptr<const kernels::sim::MeasuredKernels> measured_;  ///< null: the roofline
  std::shared_ptr<DeviceActivity> activity_;  ///< the run's busy devices (null: not tracked)
  int64_t device_ = 0;                        ///< this executor's device index in activity_
  DeviceActivity::SharedWork shared_;         ///< contended work since the last take
};

}  // namespace muflow::engine::exec
