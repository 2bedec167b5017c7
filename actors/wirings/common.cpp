#include "actors/wirings/common.hpp"

namespace muflow::actors {

WiringGraph barrier_graph(const RunContext& ctx) {
  WiringGraph g;
  g.pacing = Pacing::kIteration;
  g.dispatch = EdgeKind::kBarrier;
  g.combine = EdgeKind::kBarrier;
  g.input = InputRule::kIteration;
  g.merge = MergeRule::kIteration;
  g.max_batch_tokens = ctx.topology.scheduler.max_batch_tokens;
  g.batch_hold = false;
  for (int32_t r = 0; r < static_cast<int32_t>(ctx.num_ranks); ++r) {
    g.residual_targets.push_back({r});
  }
  g.dispatch_rule = concat_rule();
  g.combine_rule = concat_rule();
  return g;
}

std::vector<std::vector<int64_t>> per_expert_slots(const RunContext& ctx) {
  std::vector<std::vector<int64_t>> slots(ctx.config.num_layers);
  for (int64_t b = 0; b < ctx.config.num_layers; ++b) {
    for (int64_t e = 0; e < ctx.config.num_experts; ++e) {
      slots[b].push_back(ctx.placement.device_of(b, e));
    }
  }
  return slots;
}

std::vector<std::vector<int64_t>> per_device_slots(const RunContext& ctx) {
  std::vector<int64_t> devices;
  for (int64_t d = 0; d < ctx.placement.num_devices; ++d) devices.push_back(d);
  return std::vector<std::vector<int64_t>>(ctx.config.num_layers, devices);
}

std::shared_ptr<const PreparedWiring> graph_wiring(
    std::function<WiringGraph(const RunContext&)> build) {
  return std::make_shared<const StatelessWiring>(
      [build = std::move(build)](
          const RunContext& ctx) -> absl::StatusOr<std::shared_ptr<const WiringRun>> {
        return std::make_shared<const GraphRun>(build(ctx));
      });
}

}  // namespace muflow::actors
