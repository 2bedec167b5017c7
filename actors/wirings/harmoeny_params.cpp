#include "actors/wirings/harmoeny_params.hpp"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "engine/planning/harmoeny_rebalance.hpp"
#include "kernels/sim/device_kind.hpp"
#include "transport/link_model.hpp"

namespace muflow::actors {

absl::StatusOr<HarmoenyParams> resolve_harmoeny(
    const engine::topology::Topology& topology, const engine::model::ModelConfig& config,
    const engine::planning::Placement& placement, const SimSetup* sim,
    kernels::sim::Precision precision, int64_t weight_bytes, const std::string& rate_kind) {
  const engine::topology::HarmoenySpec& spec = topology.harmoeny;
  HarmoenyParams p;
  p.paper = spec.rebalance == "paper";
  p.prefetch = spec.prefetch;
  int64_t most_home = 0;
  for (int64_t d = 0; d < placement.num_devices; ++d) {
    most_home = std::max<int64_t>(most_home, placement.experts_on(d).size());
  }
  p.slots = spec.slots > 0 ? spec.slots : most_home;
  if (p.slots < most_home) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: key 'harmoeny.slots': expected at least %d (the most experts a device hosts), "
        "got %d",
        topology.source, most_home, spec.slots));
  }
  // A device never holds more distinct experts than the model has; more slots would only
  // reserve memory (on cpu, one buffer of the largest expert each).
  if (p.slots > config.num_experts) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: key 'harmoeny.slots': expected at most %d (the model's experts), got %d",
        topology.source, config.num_experts, spec.slots));
  }
  const int64_t matrices = config.gated_experts ? 3 : 2;
  const int64_t expert_bytes = matrices * config.hidden_size * config.expert_ffn * weight_bytes;
  p.copy_s.assign(placement.num_devices, 0.0);
  if (sim) {
    for (int64_t d = 0; d < placement.num_devices; ++d) {
      p.copy_s[d] = transport::transfer_seconds(sim->links[d].host, expert_bytes);
    }
  }
  if (spec.q > 0) {
    p.q = spec.q;
  } else {
    // Eq. 4 from device 0's rates on both backends: on sim its modeled kind and host link, on
    // cpu the "cpu" kind's table (the rates the sim models this host with), so a sim of a cpu
    // topology rebalances with the q its cpu run uses (#19 item 3).
    kernels::sim::DeviceKind kind;
    transport::LinkClass host;
    if (sim) {
      kind = sim->kinds.front();
      host = sim->links.front().host;
    } else {
      const std::string name = !rate_kind.empty()         ? rate_kind
                               : topology.devices.empty() ? "cpu"
                                                          : topology.devices.front().kind;
      absl::StatusOr<kernels::sim::DeviceKind> found = kernels::sim::find_device_kind(name);
      if (!found.ok()) return found.status();  // the parser checked the kind
      kind = *found;
      absl::StatusOr<transport::LinkClass> link = host_link_for(topology, kind);
      if (!link.ok()) return link.status();
      host = *link;
    }
    absl::StatusOr<int64_t> q = engine::planning::harmoeny_default_q(
        kind.peak_flops(precision), host.bandwidth_bytes_per_s, static_cast<double>(weight_bytes));
    if (!q.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: [harmoeny] q from Eq. 4: %s",
                                                        topology.source, q.status().message()));
    }
    p.q = *q;
  }
  return p;
}

}  // namespace muflow::actors
