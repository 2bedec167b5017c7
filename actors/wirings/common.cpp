#include "actors/wirings/common.hpp"

#include <utility>

namespace muflow::actors {
namespace {

// A WiringRun that is its graph and nothing else (default KV caches and expert kernels).
class GraphRun final : public WiringRun {
 public:
  explicit GraphRun(WiringGraph graph) { graph_ = std::move(graph); }
};

// A PreparedWiring without private state: each run is the graph `build(ctx)`.
class GraphWiring final : public PreparedWiring {
 public:
  explicit GraphWiring(std::function<WiringGraph(const RunContext&)> build)
      : build_(std::move(build)) {}
  absl::StatusOr<std::shared_ptr<const WiringRun>> start_run(const RunContext& ctx) const override {
    return std::make_shared<const GraphRun>(build_(ctx));
  }

 private:
  std::function<WiringGraph(const RunContext&)> build_;
};

}  // namespace

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
  return std::make_shared<const GraphWiring>(std::move(build));
}

engine::dataflow::DispatchParts dispatch_parts(const std::vector<ContributionPtr>& slot,
                                               int64_t num_experts) {
  engine::dataflow::DispatchParts parts;
  parts.reserve(slot.size());
  for (const ContributionPtr& c : slot)
    parts.push_back(c->dense_parts(static_cast<size_t>(num_experts)));
  return parts;
}

}  // namespace muflow::actors
