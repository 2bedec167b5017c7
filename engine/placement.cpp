#include "engine/placement.hpp"

#include "absl/strings/str_format.h"

namespace muflow::engine {

std::vector<int64_t> Placement::experts_on(int64_t device) const {
  std::vector<int64_t> out;
  for (int64_t e = 0; e < static_cast<int64_t>(expert_device.size()); ++e) {
    if (expert_device[e] == device) out.push_back(e);
  }
  return out;
}

absl::StatusOr<Placement> make_placement(const Topology& topology, int64_t num_experts) {
  Placement p;
  p.num_devices = static_cast<int64_t>(topology.devices.size());
  if (p.num_devices <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: the cluster declares no devices", topology.source));
  }
  if (topology.placement == "explicit") {
    if (static_cast<int64_t>(topology.expert_device.size()) != num_experts) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: key 'placement.experts' lists %d devices, but the model has %d experts",
          topology.source, topology.expert_device.size(), num_experts));
    }
    for (int64_t e = 0; e < num_experts; ++e) {
      const int64_t d = topology.expert_device[e];
      if (d < 0 || d >= p.num_devices) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: key 'placement.experts'[%d] = %d; expected a device index in [0, %d)",
            topology.source, e, d, p.num_devices));
      }
    }
    p.expert_device = topology.expert_device;
    return p;
  }
  if (topology.placement == "contiguous") {
    // Blocks of ceil(E / D) consecutive experts per device (DeepSpeed-style expert ranges;
    // HarMoEny §3 puts the hot experts 0..9 on GPU 0 this way).
    const int64_t per_device = (num_experts + p.num_devices - 1) / p.num_devices;
    p.expert_device.resize(num_experts);
    for (int64_t e = 0; e < num_experts; ++e) p.expert_device[e] = e / per_device;
    return p;
  }
  if (topology.placement != "round-robin") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: key 'placement.experts': unknown placement '%s'; expected round-robin, contiguous or explicit",
        topology.source, topology.placement));
  }
  p.expert_device.resize(num_experts);
  for (int64_t e = 0; e < num_experts; ++e) p.expert_device[e] = e % p.num_devices;
  return p;
}

}  // namespace muflow::engine
