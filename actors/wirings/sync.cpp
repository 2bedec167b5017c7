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
    return graph_wiring([](const RunContext& ctx) {
      WiringGraph g = barrier_graph(ctx);
      g.slot_device = per_expert_slots(ctx);
      return g;
    });
  }
};

}  // namespace

const Wiring& sync_wiring() {
  static const SyncWiring wiring;
  return wiring;
}

}  // namespace muflow::actors
