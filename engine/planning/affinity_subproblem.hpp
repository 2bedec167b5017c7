#pragma once
/// \file
/// The sub-problem both affinity solvers work on (ExFlow §IV: partition each block's experts
/// into equal parts so consecutive blocks' affine experts share a part), its objective and
/// checks. Internal to engine/planning/affinity_*; pure; any thread.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace muflow::engine::planning::affinity_detail {

/// One partition sub-problem of ExFlow's two-stage placement (affinity_placement.hpp): L
/// blocks of m experts each (local indices), C parts (nodes, or a node's GPUs) of m / C.
struct SubProblem {
  int64_t num_layers = 0;
  int64_t m = 0;
  int64_t num_parts = 0;
  std::vector<int64_t> w;  // [L − 1, m, m]

  /// Transitions from expert i of block s to expert j of block s + 1.
  int64_t at(int64_t s, int64_t i, int64_t j) const {
    return w[static_cast<size_t>((s * m + i) * m + j)];
  }
  /// Experts each part holds per block.
  int64_t cap() const { return m / num_parts; }
};

/// [L * m]: the part of (block s, expert i) at s * m + i.
using Parts = std::vector<int64_t>;

/// Weight of the transitions between consecutive blocks that cross parts (the hops).
int64_t sub_objective(const SubProblem& p, const Parts& parts);

/// Renumbers parts by first appearance among block 0's experts (parts are interchangeable), so
/// block 0's expert i is in a part ≤ i: the MILP's symmetry-breaking bounds hold.
void canonicalize(const SubProblem& p, Parts& parts);

/// Every block puts exactly m / C experts in each part.
bool balanced(const SubProblem& p, const Parts& parts);

}  // namespace muflow::engine::planning::affinity_detail
