#pragma once
/// \file
/// The MILP pass of ExFlow's affinity placement (affinity_placement.hpp has the formulation):
/// one sub-problem on GLPK's branch and cut, warm-started by the heuristic, under a time
/// budget. GLPK is not reentrant: calls are serialised by a process-wide mutex.

#include <cstdint>
#include <limits>

#include "engine/planning/affinity_subproblem.hpp"

namespace muflow::engine::planning::affinity_detail {

/// A MILP's result: the partition, whether GLPK proved it optimal, and the relative gap to
/// its best bound (NaN when unknown).
struct MilpOutcome {
  Parts parts;
  bool optimal = false;
  double gap = std::numeric_limits<double>::quiet_NaN();
};

/// Solves the MILP within `budget_s` seconds (wall clock), warm-started with `warm`
/// (canonical, balanced). Returns `warm` (not optimal) when the model has more than
/// `max_nonzeros` constraint nonzeros, the budget is spent or GLPK finds nothing; never
/// returns a partition worse than `warm`.
MilpOutcome solve_milp(const SubProblem& p, const Parts& warm, double budget_s,
                       int64_t max_nonzeros);

}  // namespace muflow::engine::planning::affinity_detail
