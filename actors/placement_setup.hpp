#pragma once
/// \file
/// Planned placements, applied when a Server is created:
///  - `[placement] experts = "affinity"`: one expert → device map per block from recorded
///    per-token paths (ExFlow §IV; engine/planning/affinity_placement.hpp);
///  - `[placement] experts = "capability"`: experts by expected load on devices by FLOP/s
///    (Aurora Theorem 5.1; engine/planning/aurora_placement.hpp), for clusters of mixed GPU kinds.

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "actors/backends/sim_setup.hpp"
#include "engine/model/model_config.hpp"
#include "engine/routing/router_model.hpp"
#include "kernels/sim/precision.hpp"
#include "engine/planning/placement.hpp"
#include "engine/topology/topology.hpp"

namespace muflow::actors {

/// Replaces `placement`'s expert map with ExFlow's affinity placement planned from
/// `topology.affinity_paths` (a `muflow run --record-routing` CSV of this model) over the
/// topology's nodes (devices listed node by node, the same number per node), with
/// `affinity_planner` ("heuristic", or "milp": the GLPK MILP warm-started by the heuristic,
/// under `affinity_time_limit_s`). Sets `placement->block_expert_device` ([num_layers]
/// [num_experts]) and `expert_device` to block 0's map. Blocking (the MILP may use its whole
/// time limit); call from the host thread.
/// Errors (messages name the topology and key): a wiring without the per_block_placement
/// trait (actors/wirings/wiring.hpp: its expert stages may not move between blocks); the CSV's errors (file and line); paths
/// whose blocks or experts do not fit the model; devices not grouped evenly by node; experts
/// that do not divide over the devices.
absl::Status apply_affinity_placement(const engine::topology::Topology& topology,
                                      const engine::model::ModelConfig& config,
                                      engine::planning::Placement* placement);

/// The topology's devices as a node grid for the two-stage planners: (number of nodes,
/// devices per node), nodes in order of first appearance (device = node · per_node + gpu).
/// Errors: InvalidArgument naming the topology when nodes hold different numbers of devices
/// or a node's devices are not listed together.
absl::StatusOr<std::pair<int64_t, int64_t>> node_grid(const engine::topology::Topology& topology);

/// Token counts of a router sample: every DP rank of `placement` routes `tokens_per_rank`
/// tokens (request r·N + i, position 0) through `router`; result[block][rank][expert] =
/// tokens (a token counts once per top-k expert). What the planners see before serving.
std::vector<std::vector<std::vector<int64_t>>> sample_rank_expert_tokens(
    const engine::routing::RouterModel& router, const engine::planning::Placement& placement,
    int64_t tokens_per_rank);

/// sample_rank_expert_tokens summed over blocks and ranks: [num_experts] expected loads.
std::vector<double> sample_expert_loads(const engine::routing::RouterModel& router,
                                        const engine::planning::Placement& placement,
                                        int64_t tokens_per_rank);

/// Replaces `placement->expert_device` by Aurora's Theorem 5.1 assignment: experts sorted by
/// `sample_expert_loads` (1024 tokens per rank) descending, devices by peak FLOP/s at
/// `precision` descending, num_experts / num_devices experts each. The same map serves every
/// block (the loads are summed over blocks).
/// Errors (naming the topology and key): backend other than sim (the loads come from its
/// router model and the speeds from its device kinds); a wiring without the
/// capability_placement trait; experts that do not divide over the devices.
absl::Status apply_capability_placement(const engine::topology::Topology& topology,
                                        const engine::model::ModelConfig& config,
                                        const SimSetup* sim, kernels::sim::Precision precision,
                                        engine::planning::Placement* placement);

}  // namespace muflow::actors
