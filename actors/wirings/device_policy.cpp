#include "actors/wirings/device_policy.hpp"

#include <string>

#include "absl/strings/str_format.h"
#include "actors/wirings/registry.hpp"

namespace muflow::actors {

absl::StatusOr<std::unique_ptr<engine::serving::SchedulingPolicy>> make_device_policy(
    const engine::topology::Topology& topology) {
  std::string name = topology.scheduler.policy;
  if (name.empty()) {
    absl::StatusOr<const Wiring*> wiring = find_wiring(topology.wiring);
    if (!wiring.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: key 'wiring': %s", topology.source, wiring.status().message()));
    }
    name = std::string((*wiring)->traits().default_policy);
  }
  absl::StatusOr<std::unique_ptr<engine::serving::SchedulingPolicy>> policy =
      engine::serving::make_scheduling_policy(name, topology.scheduler.defrag_lookahead,
                                              topology.scheduler.defrag_decay);
  if (!policy.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: key 'scheduler.policy': %s",
                                                      topology.source, policy.status().message()));
  }
  return policy;
}

}  // namespace muflow::actors
