#pragma once
/// \file
/// The sim backend's models for a Server: one SimExecutor per device (its device kind's cost
/// model and the topology's router model) and the big-switch network of the cluster.

#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/exec/executor.hpp"
#include "engine/model/model_config.hpp"
#include "engine/routing/router_model.hpp"
#include "engine/topology/topology.hpp"
#include "kernels/sim/cost_model.hpp"
#include "kernels/sim/measured_kernels.hpp"
#include "transport/big_switch_network.hpp"

namespace muflow::actors {

/// What the sim backend needs, built once per Server (checked at Server::create).
struct SimSetup {
  std::shared_ptr<const engine::routing::RouterModel> router;
  std::shared_ptr<const kernels::sim::CostModel> cost;
  std::vector<kernels::sim::DeviceKind> kinds;                               ///< per device
  std::vector<transport::DeviceLinks> links;                                 ///< per device
  transport::NetworkModel network_model = transport::NetworkModel::kSerial;  ///< [network] model
  /// [device][StageKind: attention, expert, sampler] host seconds added to each stage run of
  /// that type ([cost] stage + scheduler overheads of the device's kind, plus its attention /
  /// expert overhead; samplers take the attention one).
  std::vector<std::array<double, 3>> step_overhead_s;
  /// `[cost] kernels`: measured kernel times for the device kind that ran them (null: none).
  std::shared_ptr<const kernels::sim::MeasuredKernels> measured;
  /// The fit of `[cost.expert_ffn]`, when given (already applied to `cost`).
  std::optional<kernels::sim::CalibrationFit> calibration;
};

/// Builds the sim setup of `topology` for a model with `config`. Default links per device
/// kind: NVLink of that generation inside a node ("cpu" devices: PCIe 4 peer copies), IB
/// 200 Gb/s between nodes, `host_link_for` to the host; `[network]` overrides.
/// Errors: unknown device kind, link class or router (message names the topology key).
absl::StatusOr<SimSetup> make_sim_setup(const engine::topology::Topology& topology,
                                        const engine::model::ModelConfig& config);

/// The host link of a device of `kind` (what HarMoEny copies an expert's weights over;
/// bandwidth in bytes/s per direction, latency in s): the topology's `[network] host_link`,
/// else the kind's PCIe generation (H*: PCIe 5, A100: PCIe 4, V100: PCIe 3, others PCIe 4;
/// transport/link_model.hpp's presets), except a "cpu" device, whose weights are in host
/// memory already: a copy at the kind's measured memory rate
/// (`DeviceKind::host_link_bytes_per_s`, 19 GB/s for "cpu", kernels/sim/device_kind.cpp; no
/// latency). Pure; any thread. Errors: InvalidArgument for an unknown link class, naming
/// the topology key `network.host_link`.
absl::StatusOr<transport::LinkClass> host_link_for(const engine::topology::Topology& topology,
                                                   const kernels::sim::DeviceKind& kind);

/// One SimExecutor per device (indexed like topology.devices), costing ops at `precision`.
std::vector<std::shared_ptr<engine::exec::Executor>> make_sim_executors(
    const SimSetup& setup, const engine::model::ModelConfig& c, kernels::sim::Precision precision);
/// A fresh big-switch network for one run (every port idle at virtual time 0). Errors: an
/// invalid link class (transport::BigSwitchNetwork::create).
absl::StatusOr<std::shared_ptr<transport::BigSwitchNetwork>> make_sim_network(
    const SimSetup& setup);

}  // namespace muflow::actors
