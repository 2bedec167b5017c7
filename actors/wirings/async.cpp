#include "actors/wirings/async.hpp"

#include "actors/wirings/common.hpp"

namespace muflow::actors {

WiringGraph async_graph(const RunContext& ctx) {
  WiringGraph g;
  g.pacing = Pacing::kPerRequest;
  g.dispatch = EdgeKind::kPointToPoint;
  g.combine = EdgeKind::kPointToPoint;
  g.input = InputRule::kFifo;
  g.merge = ctx.topology.scheduler.merge == "wave" ? MergeRule::kWave : MergeRule::kRequest;
  g.max_batch_tokens = ctx.topology.scheduler.max_batch_tokens;
  g.batch_hold = true;
  g.slot_device = per_expert_slots(ctx);
  for (int32_t r = 0; r < static_cast<int32_t>(ctx.num_ranks); ++r) {
    g.residual_targets.push_back({r});
  }
  return g;
}

namespace {

class AsyncWiring final : public Wiring {
 public:
  std::string_view name() const override { return "async"; }
  WiringTraits traits() const override {
    return {.disaggregated_attention = true,
            .per_block_placement = false,
            .capability_placement = false,
            .default_policy = "defrag"};
  }
  absl::StatusOr<std::shared_ptr<const PreparedWiring>> prepare(const WiringSetup&) const override {
    return graph_wiring([](const RunContext& ctx) { return async_graph(ctx); });
  }
};

}  // namespace

const Wiring& async_wiring() {
  static const AsyncWiring wiring;
  return wiring;
}

}  // namespace muflow::actors
