#pragma once
/// \file
/// Expert placement: which device hosts which expert (the same for every block here).

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/topology.hpp"

namespace muflow::engine {

/// Where stages live. Attention data-parallel rank r runs on device r (sync wiring: every
/// device is a DP rank); expert e of every block runs on `expert_device[e]`.
struct Placement {
  int64_t num_devices = 0;
  std::vector<int64_t> expert_device;  ///< [num_experts], values in [0, num_devices)

  /// Experts hosted by `device`, ascending.
  std::vector<int64_t> experts_on(int64_t device) const;
};

/// Builds the placement a topology asks for: "round-robin" (expert e on device e mod D),
/// "contiguous" (expert e on device e / ceil(E/D)) or "explicit" (topology.expert_device). Errors: InvalidArgument when an explicit placement
/// does not list exactly `num_experts` devices or names a device outside [0, D).
absl::StatusOr<Placement> make_placement(const Topology& topology, int64_t num_experts);

}  // namespace muflow::engine
