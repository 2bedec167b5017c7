#include "actors/wiring_graph.hpp"

#include "absl/strings/str_format.h"

namespace muflow::actors {
namespace {

// One expert on every row of the batch.
class SingleExpertKernel final : public ExpertKernel {
 public:
  SingleExpertKernel(engine::exec::Executor* exec, int32_t block, int32_t expert)
      : exec_(exec), block_(block), expert_(expert) {}

  double compute(const engine::dataflow::TokenBatch& in, float* y,
                 std::vector<Send>& out) override {
    double modeled = 0.0;
    const float* x = in.act ? in.act->data.data() : nullptr;
    exec_->expert(block_, expert_, x, in.num_tokens(), y, &modeled);
    return modeled;
  }
  std::string name() const override { return absl::StrFormat("expert b%d e%d", block_, expert_); }

 private:
  engine::exec::Executor* exec_;
  int32_t block_, expert_;
};

}  // namespace

std::unique_ptr<ExpertKernel> single_expert_kernel(engine::exec::Executor* exec, int32_t block,
                                                   int32_t expert) {
  return std::make_unique<SingleExpertKernel>(exec, block, expert);
}

std::vector<int64_t> WiringGraph::residual_sources() const {
  std::vector<int64_t> n(residual_targets.size(), 0);
  for (const auto& targets : residual_targets) {
    for (int32_t r : targets) {
      if (r >= 0 && static_cast<size_t>(r) < n.size()) ++n[static_cast<size_t>(r)];
    }
  }
  return n;
}

bool WiringGraph::ranks_independent() const {
  if (pacing != Pacing::kIteration || dispatch != EdgeKind::kBarrier ||
      combine != EdgeKind::kBarrier || merge != MergeRule::kIteration || continuation ||
      kv_replicated || residual_targets.empty()) {
    return false;
  }
  for (size_t r = 0; r < residual_targets.size(); ++r) {
    if (residual_targets[r].size() != 1 || residual_targets[r][0] != static_cast<int32_t>(r)) {
      return false;
    }
  }
  return true;
}

std::shared_ptr<LockedKvCache> WiringRun::kv_cache(int32_t block, int32_t rank,
                                                   int64_t kv_width) const {
  return std::make_shared<LockedKvCache>(kv_width);
}

std::unique_ptr<ExpertKernel> WiringRun::expert_kernel(const RunContextPtr& ctx,
                                                       engine::exec::Executor* exec, int32_t block,
                                                       int32_t slot) const {
  return single_expert_kernel(exec, block, slot);
}

std::vector<RowFlow> row_flows(const std::vector<std::vector<int64_t>>& rows_from) {
  std::vector<RowFlow> flows;
  const size_t num_sources = rows_from.empty() ? 0 : rows_from.front().size();
  for (size_t src = 0; src < num_sources; ++src) {
    for (size_t d = 0; d < rows_from.size(); ++d) {
      if (rows_from[d][src] == 0) continue;
      flows.push_back({static_cast<int32_t>(src), static_cast<int32_t>(d), rows_from[d][src]});
    }
  }
  return flows;
}

}  // namespace muflow::actors
