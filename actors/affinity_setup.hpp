#pragma once
/// \file
/// `[placement] experts = "affinity"`: plans one expert → device map per block from recorded
/// per-token paths when a Server is created (ExFlow §IV; engine/affinity_placement.hpp).

#include "absl/status/status.h"
#include "engine/model_config.hpp"
#include "engine/placement.hpp"
#include "engine/topology.hpp"

namespace muflow::actors {

/// Replaces `placement`'s expert map with ExFlow's affinity placement planned from
/// `topology.affinity_paths` (a `muflow run --record-routing` CSV of this model) over the
/// topology's nodes (devices listed node by node, the same number per node), with
/// `affinity_planner` ("heuristic", or "milp": the GLPK MILP warm-started by the heuristic,
/// under `affinity_time_limit_s`). Sets `placement->block_expert_device` ([num_layers]
/// [num_experts]) and `expert_device` to block 0's map. Blocking (the MILP may use its whole
/// time limit); call from the host thread.
/// Errors (messages name the topology and key): a wiring other than sync or exflow (the only
/// ones whose expert stages may move between blocks); the CSV's errors (file and line); paths
/// whose blocks or experts do not fit the model; devices not grouped evenly by node; experts
/// that do not divide over the devices.
absl::Status apply_affinity_placement(const engine::Topology& topology,
                                      const engine::ModelConfig& config,
                                      engine::Placement* placement);

}  // namespace muflow::actors
