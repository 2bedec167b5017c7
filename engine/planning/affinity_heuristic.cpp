#include "engine/planning/affinity_heuristic.hpp"

#include <algorithm>
#include <numeric>
#include <tuple>
#include <vector>

#include "kernels/assert.hpp"

namespace muflow::engine::planning::affinity_detail {
namespace {

// splitmix64 (Steele, Lea, Flood 2014), for the heuristic's restarts.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Greedy: one end block as given (`seed_block`); then block by block away from it (forward when
// `forward`, from block 0; else backward, from block L − 1), each expert joins the part holding
// most of its weight to the block placed just before, largest (weight, then lowest expert, then
// lowest part) first, skipping full parts.
Parts greedy(const SubProblem& p, const std::vector<int64_t>& seed_block, bool forward) {
  const int64_t L = p.num_layers, m = p.m, C = p.num_parts;
  Parts parts(static_cast<size_t>(L * m));
  const int64_t first = forward ? 0 : L - 1;
  std::copy(seed_block.begin(), seed_block.end(), parts.begin() + first * m);
  std::vector<int64_t> aff(static_cast<size_t>(m * C));
  std::vector<int64_t> order(static_cast<size_t>(m * C));
  std::vector<int64_t> load(static_cast<size_t>(C));
  std::vector<char> done(static_cast<size_t>(m));
  for (int64_t step = 1; step < L; ++step) {
    const int64_t s = forward ? step : L - 1 - step;  // block to place
    const int64_t t = forward ? s - 1 : s + 1;        // block placed just before
    std::fill(aff.begin(), aff.end(), 0);
    for (int64_t k = 0; k < m; ++k) {
      const int64_t c = parts[static_cast<size_t>(t * m + k)];
      for (int64_t j = 0; j < m; ++j) {
        aff[static_cast<size_t>(j * C + c)] += forward ? p.at(t, k, j) : p.at(s, j, k);
      }
    }
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return aff[static_cast<size_t>(a)] > aff[static_cast<size_t>(b)];
    });
    std::fill(load.begin(), load.end(), 0);
    std::fill(done.begin(), done.end(), 0);
    for (int64_t k : order) {
      const int64_t j = k / C, c = k % C;
      if (done[static_cast<size_t>(j)] || load[static_cast<size_t>(c)] == p.cap()) continue;
      done[static_cast<size_t>(j)] = 1;
      ++load[static_cast<size_t>(c)];
      parts[static_cast<size_t>(s * m + j)] = c;
    }
  }
  return parts;
}

// Pairwise-swap local search with incremental bookkeeping. aff[(s·m + i)·C + c] is the weight
// between (s, i) and its neighbours (blocks s ± 1) in part c. Two experts of one block are not
// neighbours, so swapping a (part pa) and b (part pb) gains exactly
// aff[a][pb] + aff[b][pa] − aff[a][pa] − aff[b][pb] and changes only the neighbours' aff; a
// swap in block s can only create gains in blocks s − 1, s, s + 1, which are marked dirty.
class SwapSearch {
 public:
  SwapSearch(const SubProblem& p, Parts parts)
      : p_(&p),
        parts_(std::move(parts)),
        aff_(static_cast<size_t>(p.num_layers * p.m * p.num_parts), 0),
        dirty_(static_cast<size_t>(p.num_layers), 1),
        objective_(sub_objective(p, parts_)) {
    for (int64_t s = 0; s + 1 < p.num_layers; ++s) {
      for (int64_t i = 0; i < p.m; ++i) {
        for (int64_t j = 0; j < p.m; ++j) {
          const int64_t w = p.at(s, i, j);
          if (w == 0) continue;
          aff(s, i, part(s + 1, j)) += w;
          aff(s + 1, j, part(s, i)) += w;
        }
      }
    }
  }

  int64_t objective() const { return objective_; }
  const Parts& parts() const { return parts_; }
  int64_t part(int64_t s, int64_t i) const { return parts_[static_cast<size_t>(s * p_->m + i)]; }

  // Swaps experts a and b of block s (in different parts), whatever the gain.
  void swap(int64_t s, int64_t a, int64_t b) {
    const int64_t pa = part(s, a), pb = part(s, b);
    objective_ -= aff(s, a, pb) + aff(s, b, pa) - aff(s, a, pa) - aff(s, b, pb);
    move(s, a, pa, pb);
    move(s, b, pb, pa);
    dirty_[static_cast<size_t>(s)] = 1;
    if (s > 0) dirty_[static_cast<size_t>(s - 1)] = 1;
    if (s + 1 < p_->num_layers) dirty_[static_cast<size_t>(s + 1)] = 1;
  }

  // First-improvement swaps until no dirty block has an improving pair, or `max_scans` block
  // scans (each tries every pair of one block once).
  void descend(int64_t max_scans) {
    const int64_t L = p_->num_layers, m = p_->m;
    int64_t scans = 0;
    bool any = true;
    while (any && scans < max_scans) {
      any = false;
      for (int64_t s = 0; s < L && scans < max_scans; ++s) {
        if (!dirty_[static_cast<size_t>(s)]) continue;
        any = true;
        dirty_[static_cast<size_t>(s)] = 0;
        ++scans;
        for (int64_t a = 0; a < m; ++a) {
          for (int64_t b = a + 1; b < m; ++b) {
            const int64_t pa = part(s, a), pb = part(s, b);
            if (pa == pb) continue;
            if (aff(s, a, pb) + aff(s, b, pa) - aff(s, a, pa) - aff(s, b, pb) > 0) swap(s, a, b);
          }
        }
      }
    }
  }

 private:
  int64_t& aff(int64_t s, int64_t i, int64_t c) {
    return aff_[static_cast<size_t>((s * p_->m + i) * p_->num_parts + c)];
  }
  void move(int64_t s, int64_t a, int64_t from, int64_t to) {
    const int64_t m = p_->m;
    if (s > 0) {
      for (int64_t k = 0; k < m; ++k) {
        const int64_t w = p_->at(s - 1, k, a);
        aff(s - 1, k, from) -= w;
        aff(s - 1, k, to) += w;
      }
    }
    if (s + 1 < p_->num_layers) {
      for (int64_t k = 0; k < m; ++k) {
        const int64_t w = p_->at(s, a, k);
        aff(s + 1, k, from) -= w;
        aff(s + 1, k, to) += w;
      }
    }
    parts_[static_cast<size_t>(s * m + a)] = to;
  }

  const SubProblem* p_;
  Parts parts_;
  std::vector<int64_t> aff_;
  std::vector<char> dirty_;
  int64_t objective_;
};

}  // namespace

// The heuristic on one sub-problem (iterated local search); canonical (block 0's expert i in a
// part ≤ i). Restart r: greedy forward (even r) or backward (odd r) from an end block that is
// round robin (r < 2) or random balanced; descend; then `num_perturbations` times: swap
// kPerturbSwaps random pairs of one random block, descend, keep the result when it is no worse.
Parts solve_heuristic(const SubProblem& p, const AffinityOptions& o) {
  const int64_t L = p.num_layers, m = p.m, C = p.num_parts;
  if (C == 1) return Parts(static_cast<size_t>(L * m), 0);
  constexpr int64_t kPerturbSwaps = 3;
  const int64_t max_scans = std::max<int64_t>(1, o.max_swap_passes) * L;
  uint64_t rng = o.seed;
  auto below = [&](int64_t n) {
    return static_cast<int64_t>(splitmix64(rng) % static_cast<uint64_t>(n));
  };
  std::optional<SwapSearch> best;
  std::vector<int64_t> end_block(static_cast<size_t>(m));
  for (int64_t r = 0; r < o.num_restarts; ++r) {
    for (int64_t i = 0; i < m; ++i) end_block[static_cast<size_t>(i)] = i % C;
    if (r >= 2) {  // random balanced end block (Fisher–Yates)
      for (int64_t i = m - 1; i > 0; --i) {
        std::swap(end_block[static_cast<size_t>(i)], end_block[static_cast<size_t>(below(i + 1))]);
      }
    }
    SwapSearch cur(p, greedy(p, end_block, r % 2 == 0));
    if (o.max_swap_passes > 0) cur.descend(max_scans);
    if (!best || cur.objective() < best->objective()) best = cur;
    if (o.max_swap_passes == 0) continue;
    for (int64_t t = 0; t < o.num_perturbations; ++t) {
      SwapSearch trial = cur;
      const int64_t s = below(L);
      for (int64_t k = 0; k < kPerturbSwaps; ++k) {
        const int64_t a = below(m), b = below(m);
        if (trial.part(s, a) != trial.part(s, b)) trial.swap(s, a, b);
      }
      trial.descend(max_scans);
      if (trial.objective() <= cur.objective()) {
        cur = std::move(trial);
        if (cur.objective() < best->objective()) best = cur;
      }
    }
  }
  Parts parts = best->parts();
  MUFLOW_ASSERT(sub_objective(p, parts) == best->objective(),
                "affinity heuristic lost track of its objective");
  canonicalize(p, parts);
  MUFLOW_ASSERT(balanced(p, parts), "affinity heuristic produced an unbalanced partition");
  return parts;
}

}  // namespace muflow::engine::planning::affinity_detail
