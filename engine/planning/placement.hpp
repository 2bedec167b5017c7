#pragma once
/// \file
/// Expert placement: which device hosts which expert (the same for every block here).

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/topology/topology.hpp"

namespace muflow::engine::planning {

/// Where stages live. Attention data-parallel rank r (every block) and its sampler run on
/// device `rank_device[r]`; expert e of every block runs on `expert_device[e]`.
struct Placement {
  int64_t num_devices = 0;
  std::vector<int64_t> expert_device;  ///< [num_experts], values in [0, num_devices)
  /// [num_ranks]: sync wiring 0..D-1 (every device is a DP rank); async wiring 0..A-1 (the
  /// attention devices, disjoint from the expert devices A..D-1).
  std::vector<int64_t> rank_device;

  /// [num_layers][num_experts] when the expert → device map differs per block (affinity
  /// placement, ExFlow §IV); empty = `expert_device` for every block.
  std::vector<std::vector<int64_t>> block_expert_device;

  /// Experts hosted by `device` (block 0's map), ascending.
  std::vector<int64_t> experts_on(int64_t device) const;
  /// Device of expert `e` in block `block` (both in range; asserts).
  int64_t device_of(int64_t block, int64_t e) const;
};

/// Builds the placement a topology asks for. Expert devices are every device (every device is
/// an attention DP rank), or with `disaggregated_attention` (the wiring's trait, e.g. AsyncMoE)
/// the devices after the attention devices (`topology.attention_devices`, default D/2); over
/// those X devices: "round-robin" (expert e on the (e mod X)-th), "contiguous" (on the
/// (e / ceil(E/X))-th) or "explicit" (topology.expert_device, global device indices).
/// Errors: InvalidArgument when an explicit placement does not list exactly `num_experts`
/// devices or names a device outside the expert devices, or a disaggregated placement has
/// fewer than 2 devices or no device left for the experts.
absl::StatusOr<Placement> make_placement(const topology::Topology& topology, int64_t num_experts,
                                         bool disaggregated_attention = false);

}  // namespace muflow::engine::planning
