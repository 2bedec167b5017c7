#pragma once
/// \file
/// `muflow plan TOPOLOGY`: what the placement and communication planners make of a topology,
/// without serving a request (ARCHITECTURE.md "Policies and planners"; issue 6).
///
///  - **All-to-all order** (Aurora §4–5, Theorems 4.2 and 5.2): per MoE block, the dispatch
///    traffic matrix between devices — from a real per-rank routing trace (HarMoEny's
///    `switch-base-per-rank-bookcorpus.csv` format) or from the topology's router on a sample
///    of tokens per DP rank — served on the sim backend's big-switch network in each order of
///    `transport::A2aOrder`, next to its lower bound b_max. (Under sync the combine is the
///    transpose and has the same bound; exflow's differs, see actors/collective.cpp.)
///  - **Mixed GPU kinds** (Aurora Theorem 5.1): when the devices are of different kinds,
///    the experts sorted by load assigned to the devices in descending FLOP/s.
///  - **Affinity placement** (ExFlow §IV): from recorded per-token paths
///    (`muflow run --record-routing`), cross-device hops of round-robin placement vs the
///    heuristic and the MILP.
///  - **Colocation** (Aurora §6–7): with a second topology, the two models' experts paired
///    per device by bottleneck matching vs pairing expert i with expert i.
///
/// Everything here runs on the calling thread; no actors are spawned.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/topology/topology.hpp"

namespace muflow::actors {

/// What `muflow plan` reads besides the topology.
struct PlanOptions {
  /// Per-rank routing counts CSV (HarMoEny format); empty = sample the topology's router.
  std::string traffic_file;
  int64_t traffic_iteration = 0;   ///< which iteration of `traffic_file` to plan for (>= 0)
  int64_t sample_tokens = 1024;    ///< router sample: tokens per DP rank (>= 1)
  /// Recorded per-token paths (engine/routing/routing_record.hpp CSV) for the affinity planner;
  /// empty = skip it.
  std::string routing_file;
  /// Held-out recorded paths (same format) on which the planned placements are also scored,
  /// so the reported cut is not only in-sample; empty = skip.
  std::string evaluate_file;
  std::string affinity_method = "both";  ///< "milp" | "heuristic" | "both"
  double affinity_time_limit_s = 10.0;   ///< MILP wall-clock budget (> 0)
  /// A second topology whose model is colocated with this one (same number of devices and
  /// experts per device); empty = skip.
  std::string colocate_topology;
};

/// Builds the plan report of `topology` as text (the `muflow plan` output: one section per
/// planner, each line prefixed by nothing; numbers in ms, tokens and hops).
/// Errors: those of Server::create for the topology (and the colocated one); InvalidArgument
/// naming the file for a traffic CSV whose world size is not the topology's DP ranks or
/// whose experts differ from the model's, an iteration out of range, a routing CSV whose
/// top-k or blocks do not fit the model, bad option values; the MILP solver's failure.
absl::StatusOr<std::string> plan_report(const engine::topology::Topology& topology,
                                        const PlanOptions& options);

}  // namespace muflow::actors
