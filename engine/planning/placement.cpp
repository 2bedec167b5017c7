#include "engine/planning/placement.hpp"

#include "absl/strings/str_format.h"

namespace muflow::engine::planning {

std::vector<int64_t> Placement::experts_on(int64_t device) const {
  std::vector<int64_t> out;
  for (int64_t e = 0; e < static_cast<int64_t>(expert_device.size()); ++e) {
    if (expert_device[e] == device) out.push_back(e);
  }
  return out;
}

int64_t Placement::device_of(int64_t block, int64_t e) const {
  if (block_expert_device.empty()) return expert_device.at(e);
  return block_expert_device.at(block).at(e);
}

absl::StatusOr<Placement> make_placement(const topology::Topology& topology, int64_t num_experts,
                                         bool disaggregated_attention) {
  Placement p;
  p.num_devices = static_cast<int64_t>(topology.devices.size());
  if (p.num_devices <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: the cluster declares no devices", topology.source));
  }
  // Devices that host experts: all (attention on every device), or the ones after the
  // attention devices when attention and experts are disaggregated.
  int64_t first_expert_device = 0;
  if (disaggregated_attention) {
    if (p.num_devices < 2) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: wiring '%s' puts attention and experts on disjoint devices and needs at "
          "least 2 devices, got %d",
          topology.source, topology.wiring, p.num_devices));
    }
    const int64_t a =
        topology.attention_devices > 0 ? topology.attention_devices : p.num_devices / 2;
    if (a >= p.num_devices) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: key 'placement.attention_devices' = %d leaves no device for the experts (%d "
          "devices)",
          topology.source, a, p.num_devices));
    }
    for (int64_t d = 0; d < a; ++d) p.rank_device.push_back(d);
    first_expert_device = a;
  } else {
    for (int64_t d = 0; d < p.num_devices; ++d) p.rank_device.push_back(d);
  }
  const int64_t X = p.num_devices - first_expert_device;
  if (topology.placement == "explicit") {
    if (static_cast<int64_t>(topology.expert_device.size()) != num_experts) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: key 'placement.experts' lists %d devices, but the model has %d experts",
          topology.source, topology.expert_device.size(), num_experts));
    }
    for (int64_t e = 0; e < num_experts; ++e) {
      const int64_t d = topology.expert_device[e];
      if (d < first_expert_device || d >= p.num_devices) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: key 'placement.experts'[%d] = %d; expected an expert device index in [%d, %d)%s",
            topology.source, e, d, first_expert_device, p.num_devices,
            first_expert_device > 0 ? " (devices before it run attention under 'async')" : ""));
      }
    }
    p.expert_device = topology.expert_device;
    return p;
  }
  p.expert_device.resize(num_experts);
  if (topology.placement == "contiguous") {
    // Blocks of ceil(E / X) consecutive experts per device (DeepSpeed-style expert ranges;
    // HarMoEny §3 puts the hot experts 0..9 on GPU 0 this way).
    const int64_t per_device = (num_experts + X - 1) / X;
    for (int64_t e = 0; e < num_experts; ++e) {
      p.expert_device[e] = first_expert_device + e / per_device;
    }
    return p;
  }
  if (topology.placement == "affinity" || topology.placement == "capability") {
    // Round robin until the planner (actors::Server, which has the recorded paths or the
    // router and device models) replaces it.
    for (int64_t e = 0; e < num_experts; ++e) p.expert_device[e] = first_expert_device + e % X;
    return p;
  }
  if (topology.placement != "round-robin") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: key 'placement.experts': unknown placement '%s'; expected round-robin, contiguous "
        "or explicit",
        topology.source, topology.placement));
  }
  for (int64_t e = 0; e < num_experts; ++e) p.expert_device[e] = first_expert_device + e % X;
  return p;
}

}  // namespace muflow::engine::planning
