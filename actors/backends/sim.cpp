#include "actors/backends/sim.hpp"

#include <algorithm>
#include <caf/all.hpp>

#include "absl/strings/str_format.h"
#include "engine/model/hf_config.hpp"
#include "engine/serving/kv_admission.hpp"
#include "transport/sim_network_channel.hpp"

namespace muflow::actors {
namespace {

class SimBackend final : public Backend {
 public:
  SimBackend(engine::model::ModelConfig config, SimSetup setup,
             const engine::topology::Topology& topology)
      : setup_(std::move(setup)),
        a2a_order_name_(topology.network.a2a_order),
        seed_(topology.router.seed),
        elem_bytes_(topology.model.dtype == "bf16" ? 2 : 4) {
    config_ = std::move(config);
    precision_ = topology.model.dtype == "bf16" ? kernels::sim::Precision::kBF16
                                                : kernels::sim::Precision::kF32;
  }
  std::string_view name() const override { return "sim"; }
  bool virtual_time() const override { return true; }
  // CAF's deterministic scheduler runs every actor on the driving thread; delayed messages
  // fire when the driver advances the clock (ARCHITECTURE.md §4).
  void configure_clock(caf::actor_system_config& cfg) const override {
    cfg.set("scheduler.policy", caf::atom("testing"));
  }
  const SimSetup* sim() const override { return &setup_; }

  std::vector<std::shared_ptr<engine::exec::Executor>> make_executors(
      const PreparedWiring&) const override {
    return make_sim_executors(setup_, config_, precision_);
  }
  absl::StatusOr<std::shared_ptr<transport::Channel>> make_channel(
      const transport::Channel* share_links_with) const override {
    absl::StatusOr<transport::A2aOrder> order = transport::parse_a2a_order(a2a_order_name_);
    if (!order.ok()) return order.status();
    std::shared_ptr<transport::BigSwitchNetwork> network;
    if (const auto* other = dynamic_cast<const transport::SimNetworkChannel*>(share_links_with)) {
      network = other->network();  // colocated runs share the devices' ports
    } else {
      absl::StatusOr<std::shared_ptr<transport::BigSwitchNetwork>> fresh = make_sim_network(setup_);
      if (!fresh.ok()) return fresh.status();
      network = *fresh;
    }
    return std::make_shared<transport::SimNetworkChannel>(std::move(network), *order, seed_);
  }
  // The device's memory (90% usable) less the weights it holds.
  int64_t kv_capacity_bytes(int64_t device, int64_t experts_here) const override {
    return std::max<int64_t>(
        0, static_cast<int64_t>(0.9 * static_cast<double>(setup_.kinds[device].memory_bytes)) -
               engine::serving::resident_weight_bytes(config_, true, experts_here, elem_bytes_));
  }

 private:
  SimSetup setup_;
  std::string a2a_order_name_;
  uint64_t seed_;       // mixed into each all-to-all's order key (the random order)
  int64_t elem_bytes_;  // weight bytes per element
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> make_sim_backend(
    const engine::topology::Topology& topology) {
  absl::StatusOr<engine::model::ModelConfig> config =
      !topology.model.path.empty()
          ? engine::model::parse_hf_config(topology.model.path + "/config.json")
          : (topology.model.synthetic
                 ? absl::StatusOr<engine::model::ModelConfig>(*topology.model.synthetic)
                 : absl::InvalidArgumentError(absl::StrFormat(
                       "%s: [model] needs 'path', 'preset' or synthetic dims", topology.source)));
  if (!config.ok()) return config.status();
  if (absl::Status s = config->validate(); !s.ok()) return s;
  if (absl::Status s = engine::topology::check_topology_against_model(topology, *config); !s.ok()) {
    return s;
  }
  absl::StatusOr<SimSetup> setup = make_sim_setup(topology, *config);
  if (!setup.ok()) return setup.status();
  return std::make_unique<SimBackend>(std::move(*config), std::move(*setup), topology);
}

}  // namespace muflow::actors
