#include "actors/wirings/sync.hpp"

#include "actors/wirings/common.hpp"

namespace muflow::actors {
namespace {

class SyncWiring final : public Wiring {
 public:
  std::string_view name() const override { return "sync"; }
  WiringTraits traits() const override {
    return {.disaggregated_attention = false,
            .per_block_placement = true,
            .capability_placement = true};
  }
  absl::StatusOr<std::shared_ptr<const PreparedWiring>> prepare(const WiringSetup&) const override {
    return std::make_shared<const StatelessWiring>(
        [](const RunContext& ctx) -> absl::StatusOr<std::shared_ptr<const WiringRun>> {
          WiringGraph g = barrier_graph(ctx);
          g.slot_device = per_expert_slots(ctx);
          return std::make_shared<const GraphRun>(std::move(g));
        });
  }
};

}  // namespace

const Wiring& sync_wiring() {
  static const SyncWiring wiring;
  return wiring;
}

}  // namespace muflow::actors
