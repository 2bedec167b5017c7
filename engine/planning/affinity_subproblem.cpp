#include "engine/planning/affinity_subproblem.hpp"

#include <algorithm>

namespace muflow::engine::planning::affinity_detail {

int64_t sub_objective(const SubProblem& p, const Parts& parts) {
  int64_t obj = 0;
  for (int64_t s = 0; s + 1 < p.num_layers; ++s) {
    for (int64_t i = 0; i < p.m; ++i) {
      const int64_t pi = parts[static_cast<size_t>(s * p.m + i)];
      for (int64_t j = 0; j < p.m; ++j) {
        if (pi != parts[static_cast<size_t>((s + 1) * p.m + j)]) obj += p.at(s, i, j);
      }
    }
  }
  return obj;
}

// Renumbers parts by first appearance among block 0's experts (parts are interchangeable), so
// block 0's expert i is in a part ≤ i: the MILP's symmetry-breaking bounds hold.
void canonicalize(const SubProblem& p, Parts& parts) {
  std::vector<int64_t> label(static_cast<size_t>(p.num_parts), -1);
  int64_t next = 0;
  for (int64_t i = 0; i < p.m; ++i) {
    int64_t& l = label[static_cast<size_t>(parts[static_cast<size_t>(i)])];
    if (l < 0) l = next++;
  }
  for (int64_t& l : label) {
    if (l < 0) l = next++;  // unreachable when balanced (every part holds block-0 experts)
  }
  for (int64_t& x : parts) x = label[static_cast<size_t>(x)];
}

bool balanced(const SubProblem& p, const Parts& parts) {
  if (static_cast<int64_t>(parts.size()) != p.num_layers * p.m) return false;
  std::vector<int64_t> load(static_cast<size_t>(p.num_parts));
  for (int64_t s = 0; s < p.num_layers; ++s) {
    std::fill(load.begin(), load.end(), 0);
    for (int64_t i = 0; i < p.m; ++i) {
      const int64_t c = parts[static_cast<size_t>(s * p.m + i)];
      if (c < 0 || c >= p.num_parts) return false;
      ++load[static_cast<size_t>(c)];
    }
    for (int64_t l : load) {
      if (l != p.cap()) return false;
    }
  }
  return true;
}

}  // namespace muflow::engine::planning::affinity_detail
