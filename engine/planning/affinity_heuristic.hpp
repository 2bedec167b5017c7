#pragma once
/// \file
/// The heuristic pass of ExFlow's affinity placement (affinity_placement.hpp): greedy
/// construction block by block and a pairwise-swap local search with restarts and
/// perturbations. Deterministic for a given options.seed; any thread.

#include "engine/planning/affinity_placement.hpp"
#include "engine/planning/affinity_subproblem.hpp"

namespace muflow::engine::planning::affinity_detail {

/// A balanced, canonical partition of `p` (iterated local search within the options' restarts
/// and perturbations).
Parts solve_heuristic(const SubProblem& p, const AffinityOptions& o);

}  // namespace muflow::engine::planning::affinity_detail
