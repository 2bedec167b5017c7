#include "engine/planning/affinity_placement.hpp"

#include <glpk.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/assert.hpp"

namespace muflow::engine {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kMaxDim = int64_t{1} << 20;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

absl::Status validate_dims(const char* what, int64_t num_layers, int64_t num_experts) {
  if (num_layers < 1 || num_layers > kMaxDim || num_experts < 1 || num_experts > kMaxDim) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": num_layers and num_experts must be in [1, 2^20], got num_layers=", num_layers,
        " num_experts=", num_experts));
  }
  return absl::OkStatus();
}

absl::Status validate_counts(const AffinityCounts& c) {
  if (auto s = validate_dims("affinity counts", c.num_layers, c.num_experts); !s.ok()) return s;
  const uint64_t expected = static_cast<uint64_t>(c.num_layers - 1) *
                            static_cast<uint64_t>(c.num_experts) *
                            static_cast<uint64_t>(c.num_experts);
  if (static_cast<uint64_t>(c.weights.size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "affinity counts: ", c.weights.size(), " weights, expected (num_layers - 1) * ",
        "num_experts^2 = ", c.num_layers - 1, " * ", c.num_experts, "^2 = ", expected));
  }
  // Totals up to 2^53 keep every sum of the search in int64 and every MILP cost exact in double.
  constexpr int64_t kMaxTotal = int64_t{1} << 53;
  int64_t total = 0;
  for (size_t k = 0; k < c.weights.size(); ++k) {
    if (c.weights[k] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("affinity counts: weight ", k, " is negative (", c.weights[k], ")"));
    }
    if (c.weights[k] > kMaxTotal - total) {
      return absl::InvalidArgumentError("affinity counts: total token count exceeds 2^53");
    }
    total += c.weights[k];
  }
  return absl::OkStatus();
}

absl::Status validate_placement(const AffinityCounts& c, const AffinityPlacement& p) {
  const int64_t L = c.num_layers, E = c.num_experts, G = p.num_devices;
  if (G < 1 || G > E || E % G != 0) {
    return absl::InvalidArgumentError(absl::StrCat("affinity placement: num_devices=", G,
                                                   " must be >= 1 and divide num_experts=", E));
  }
  if (static_cast<int64_t>(p.expert_device.size()) != L) {
    return absl::InvalidArgumentError(absl::StrCat("affinity placement: ", p.expert_device.size(),
                                                   " blocks, the counts have num_layers=", L));
  }
  const int64_t per_device = E / G;
  std::vector<int64_t> load(static_cast<size_t>(G));
  for (int64_t s = 0; s < L; ++s) {
    const auto& row = p.expert_device[static_cast<size_t>(s)];
    if (static_cast<int64_t>(row.size()) != E) {
      return absl::InvalidArgumentError(absl::StrCat("affinity placement: block ", s, " has ",
                                                     row.size(), " experts, expected ", E));
    }
    std::fill(load.begin(), load.end(), 0);
    for (int64_t e = 0; e < E; ++e) {
      const int64_t d = row[static_cast<size_t>(e)];
      if (d < 0 || d >= G) {
        return absl::InvalidArgumentError(absl::StrCat("affinity placement: block ", s, " expert ",
                                                       e, " on device ", d, ", outside [0, ", G,
                                                       ")"));
      }
      ++load[static_cast<size_t>(d)];
    }
    for (int64_t d = 0; d < G; ++d) {
      if (load[static_cast<size_t>(d)] != per_device) {
        return absl::InvalidArgumentError(
            absl::StrCat("affinity placement: device ", d, " hosts ", load[static_cast<size_t>(d)],
                         " experts of block ", s,
                         ", a balanced placement needs num_experts / num_devices = ", per_device));
      }
    }
  }
  return absl::OkStatus();
}

// Hops between groups of `group` consecutive devices (group 1: devices; g: nodes). Inputs valid.
HopCount count_hops(const AffinityCounts& c, const AffinityPlacement& p, int64_t group) {
  HopCount h;
  const int64_t E = c.num_experts;
  for (int64_t s = 0; s + 1 < c.num_layers; ++s) {
    const auto& from = p.expert_device[static_cast<size_t>(s)];
    const auto& to = p.expert_device[static_cast<size_t>(s + 1)];
    for (int64_t i = 0; i < E; ++i) {
      const int64_t gi = from[static_cast<size_t>(i)] / group;
      for (int64_t j = 0; j < E; ++j) {
        const int64_t w = c.at(s, i, j);
        h.total += w;
        if (gi != to[static_cast<size_t>(j)] / group) h.hops += w;
      }
    }
  }
  return h;
}

// ---------------------------------------------------------------------------------------------
// One partition sub-problem: L blocks of m experts each (local indices), C parts of m / C.

struct SubProblem {
  int64_t num_layers = 0;
  int64_t m = 0;
  int64_t num_parts = 0;
  std::vector<int64_t> w;  // [L − 1, m, m]

  int64_t at(int64_t s, int64_t i, int64_t j) const {
    return w[static_cast<size_t>((s * m + i) * m + j)];
  }
  int64_t cap() const { return m / num_parts; }
};

using Parts = std::vector<int64_t>;  // [L * m]: part of (block s, expert i) at s * m + i

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

// ---------------------------------------------------------------------------------------------
// GLPK MILP of one sub-problem (see the header for the formulation).

std::mutex& glpk_mutex() {
  static std::mutex mu;
  return mu;
}

struct MilpOutcome {
  Parts parts;
  bool optimal = false;
  double gap = std::numeric_limits<double>::quiet_NaN();
};

struct CallbackInfo {
  const std::vector<double>* warm = nullptr;  // 1-based column values
  bool warm_given = false;
  double bound = -std::numeric_limits<double>::infinity();
};

void milp_callback(glp_tree* tree, void* info) {
  auto* cb = static_cast<CallbackInfo*>(info);
  if (glp_ios_reason(tree) == GLP_IHEUR && !cb->warm_given) {
    cb->warm_given = true;
    glp_ios_heur_sol(tree, cb->warm->data());  // rejected (nonzero) only if not better
  }
  if (const int node = glp_ios_best_node(tree); node != 0) {
    cb->bound = std::max(cb->bound, glp_ios_node_bound(tree, node));
  }
}

int to_glpk_ms(double seconds) {
  const double ms = std::floor(seconds * 1000.0);
  return static_cast<int>(std::clamp(ms, 1.0, static_cast<double>(INT_MAX / 2)));
}

// Solves the MILP within `budget_s` seconds, warm-started with `warm` (canonical, balanced).
// Returns `warm` (not optimal) when the model is too large, the budget is spent or GLPK finds
// nothing; never returns a partition worse than `warm`.
MilpOutcome solve_milp(const SubProblem& p, const Parts& warm, double budget_s,
                       int64_t max_nonzeros) {
  MilpOutcome out;
  out.parts = warm;
  const int64_t L = p.num_layers, m = p.m, C = p.num_parts;
  if (C == 1) {
    out.optimal = true;
    out.gap = 0.0;
    return out;
  }
  struct Pair {
    int64_t s, i, j, w;
  };
  std::vector<Pair> pairs;
  for (int64_t s = 0; s + 1 < L; ++s) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        if (const int64_t w = p.at(s, i, j); w > 0) pairs.push_back({s, i, j, w});
      }
    }
  }
  const int64_t num_x = L * m * C;
  const int64_t num_y = static_cast<int64_t>(pairs.size());
  const int64_t nnz = 2 * num_x + 3 * num_y * C;
  const int64_t num_rows = L * m + L * C + num_y * C;
  const int64_t limit = std::min<int64_t>(max_nonzeros, INT_MAX / 4);
  if (budget_s <= 0.0 || nnz > limit || num_rows > limit || num_x + num_y > limit) return out;

  const auto start = Clock::now();
  std::lock_guard<std::mutex> lock(glpk_mutex());
  const int previous_term = glp_term_out(GLP_OFF);
  std::unique_ptr<glp_prob, void (*)(glp_prob*)> prob(glp_create_prob(), glp_delete_prob);
  glp_prob* P = prob.get();
  glp_set_obj_dir(P, GLP_MIN);
  auto xcol = [&](int64_t s, int64_t i, int64_t c) {
    return static_cast<int>(1 + (s * m + i) * C + c);
  };
  glp_add_cols(P, static_cast<int>(num_x + num_y));
  for (int64_t s = 0; s < L; ++s) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t c = 0; c < C; ++c) {
        const int col = xcol(s, i, c);
        glp_set_col_kind(P, col, GLP_BV);
        if (s == 0 && c > i) glp_set_col_bnds(P, col, GLP_FX, 0.0, 0.0);  // symmetry breaking
      }
    }
  }
  for (int64_t k = 0; k < num_y; ++k) {
    const int col = static_cast<int>(1 + num_x + k);
    glp_set_col_bnds(P, col, GLP_DB, 0.0, 1.0);
    glp_set_obj_coef(P, col, static_cast<double>(pairs[static_cast<size_t>(k)].w));
  }
  glp_add_rows(P, static_cast<int>(num_rows));
  std::vector<int> ia(static_cast<size_t>(nnz + 1)), ja(static_cast<size_t>(nnz + 1));
  std::vector<double> ar(static_cast<size_t>(nnz + 1));
  int row = 0, k = 0;
  auto put = [&](int r, int col, double v) {
    ++k;
    ia[static_cast<size_t>(k)] = r;
    ja[static_cast<size_t>(k)] = col;
    ar[static_cast<size_t>(k)] = v;
  };
  for (int64_t s = 0; s < L; ++s) {  // Σ_c x[s,i,c] = 1
    for (int64_t i = 0; i < m; ++i) {
      glp_set_row_bnds(P, ++row, GLP_FX, 1.0, 1.0);
      for (int64_t c = 0; c < C; ++c) put(row, xcol(s, i, c), 1.0);
    }
  }
  for (int64_t s = 0; s < L; ++s) {  // Σ_i x[s,i,c] = m / C
    for (int64_t c = 0; c < C; ++c) {
      const double cap = static_cast<double>(p.cap());
      glp_set_row_bnds(P, ++row, GLP_FX, cap, cap);
      for (int64_t i = 0; i < m; ++i) put(row, xcol(s, i, c), 1.0);
    }
  }
  for (int64_t y = 0; y < num_y; ++y) {  // y − x[s,i,c] + x[s+1,j,c] ≥ 0
    const Pair& pr = pairs[static_cast<size_t>(y)];
    for (int64_t c = 0; c < C; ++c) {
      glp_set_row_bnds(P, ++row, GLP_LO, 0.0, 0.0);
      put(row, static_cast<int>(1 + num_x + y), 1.0);
      put(row, xcol(pr.s, pr.i, c), -1.0);
      put(row, xcol(pr.s + 1, pr.j, c), 1.0);
    }
  }
  MUFLOW_ASSERT(row == num_rows && k == nnz, "affinity MILP row/nonzero count mismatch");
  glp_load_matrix(P, static_cast<int>(nnz), ia.data(), ja.data(), ar.data());

  std::vector<double> warm_x(static_cast<size_t>(1 + num_x + num_y), 0.0);
  for (int64_t s = 0; s < L; ++s) {
    for (int64_t i = 0; i < m; ++i) {
      warm_x[static_cast<size_t>(xcol(s, i, warm[static_cast<size_t>(s * m + i)]))] = 1.0;
    }
  }
  for (int64_t y = 0; y < num_y; ++y) {
    const Pair& pr = pairs[static_cast<size_t>(y)];
    warm_x[static_cast<size_t>(1 + num_x + y)] =
        warm[static_cast<size_t>(pr.s * m + pr.i)] !=
                warm[static_cast<size_t>((pr.s + 1) * m + pr.j)]
            ? 1.0
            : 0.0;
  }

  auto remaining = [&] { return budget_s - seconds_between(start, Clock::now()); };
  bool have_solution = false;
  if (remaining() > 0.0) {
    glp_smcp smcp;
    glp_init_smcp(&smcp);
    smcp.msg_lev = GLP_MSG_OFF;
    smcp.presolve = GLP_OFF;
    // The all-slack start is dual feasible (w ≥ 0, x has cost 0), and on this very degenerate
    // LP the dual simplex reached the root optimum ~20% sooner than the primal in our runs.
    smcp.meth = GLP_DUALP;
    smcp.tm_lim = to_glpk_ms(remaining());
    if (glp_simplex(P, &smcp) == 0 && glp_get_status(P) == GLP_OPT && remaining() > 0.0) {
      CallbackInfo cb;
      cb.warm = &warm_x;
      glp_iocp iocp;
      glp_init_iocp(&iocp);
      iocp.msg_lev = GLP_MSG_OFF;
      iocp.presolve = GLP_OFF;
      iocp.tm_lim = to_glpk_ms(remaining());
      iocp.cb_func = milp_callback;
      iocp.cb_info = &cb;
      glp_intopt(P, &iocp);
      const int status = glp_mip_status(P);
      if (status == GLP_OPT || status == GLP_FEAS) {
        Parts parts(static_cast<size_t>(L * m), -1);
        for (int64_t s = 0; s < L; ++s) {
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t c = 0; c < C; ++c) {
              if (glp_mip_col_val(P, xcol(s, i, c)) > 0.5)
                parts[static_cast<size_t>(s * m + i)] = c;
            }
          }
        }
        if (balanced(p, parts)) {
          have_solution = true;
          if (sub_objective(p, parts) <= sub_objective(p, warm)) out.parts = std::move(parts);
          canonicalize(p, out.parts);
          const double value = static_cast<double>(sub_objective(p, out.parts));
          if (status == GLP_OPT) {
            out.optimal = true;
            out.gap = 0.0;
          } else if (std::isfinite(cb.bound)) {
            const double bound = std::max(0.0, std::ceil(cb.bound - 1e-6));
            out.gap = value > 0.0 ? std::max(0.0, (value - bound) / value) : 0.0;
          }
        }
      }
    }
  }
  glp_term_out(previous_term);
  if (!have_solution) out.parts = warm;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Two stages: nodes, then each node's GPUs.

struct Staged {
  AffinityPlacement placement;
  bool optimal = true;
  double gap = 0.0;
};

void merge_outcome(Staged& st, const MilpOutcome& o) {
  st.optimal = st.optimal && o.optimal;
  if (std::isnan(o.gap) || std::isnan(st.gap)) {
    st.gap = std::numeric_limits<double>::quiet_NaN();
  } else {
    st.gap = std::max(st.gap, o.gap);
  }
}

Staged solve_staged(const AffinityCounts& c, int64_t num_nodes, int64_t gpus_per_node,
                    const AffinityOptions& o, bool milp, Clock::time_point deadline) {
  const int64_t L = c.num_layers, E = c.num_experts;
  auto left = [&] { return seconds_between(Clock::now(), deadline); };
  Staged st;
  st.optimal = milp;
  st.gap = milp ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  // Stage 1: experts → nodes.
  Parts node(static_cast<size_t>(L * E), 0);
  if (num_nodes > 1) {
    SubProblem sub{L, E, num_nodes, c.weights};
    node = solve_heuristic(sub, o);
    if (milp) {
      const double budget = gpus_per_node > 1 ? left() / 2.0 : left();
      MilpOutcome out = solve_milp(sub, node, budget, o.max_milp_nonzeros);
      node = out.parts;
      merge_outcome(st, out);
    }
  }
  // Stage 2: each node's experts → its GPUs, with the transitions inside the node only.
  st.placement.num_devices = num_nodes * gpus_per_node;
  st.placement.expert_device.assign(static_cast<size_t>(L),
                                    std::vector<int64_t>(static_cast<size_t>(E)));
  const int64_t m = E / num_nodes;
  for (int64_t n = 0; n < num_nodes; ++n) {
    std::vector<std::vector<int64_t>> members(static_cast<size_t>(L));
    for (int64_t s = 0; s < L; ++s) {
      for (int64_t e = 0; e < E; ++e) {
        if (node[static_cast<size_t>(s * E + e)] == n) members[static_cast<size_t>(s)].push_back(e);
      }
      MUFLOW_ASSERT(static_cast<int64_t>(members[static_cast<size_t>(s)].size()) == m,
                    "affinity stage 1 produced an unbalanced node partition");
    }
    Parts gpu(static_cast<size_t>(L * m), 0);
    if (gpus_per_node > 1) {
      SubProblem sub{L, m, gpus_per_node,
                     std::vector<int64_t>(static_cast<size_t>((L - 1) * m * m))};
      for (int64_t s = 0; s + 1 < L; ++s) {
        for (int64_t a = 0; a < m; ++a) {
          for (int64_t b = 0; b < m; ++b) {
            sub.w[static_cast<size_t>((s * m + a) * m + b)] =
                c.at(s, members[static_cast<size_t>(s)][static_cast<size_t>(a)],
                     members[static_cast<size_t>(s + 1)][static_cast<size_t>(b)]);
          }
        }
      }
      gpu = solve_heuristic(sub, o);
      if (milp) {
        MilpOutcome out =
            solve_milp(sub, gpu, left() / static_cast<double>(num_nodes - n), o.max_milp_nonzeros);
        gpu = out.parts;
        merge_outcome(st, out);
      }
    }
    for (int64_t s = 0; s < L; ++s) {
      for (int64_t a = 0; a < m; ++a) {
        st.placement.expert_device[static_cast<size_t>(s)][static_cast<size_t>(
            members[static_cast<size_t>(s)][static_cast<size_t>(a)])] =
            n * gpus_per_node + gpu[static_cast<size_t>(s * m + a)];
      }
    }
  }
  return st;
}

AffinitySolution describe(const AffinityCounts& c, AffinityPlacement placement,
                          int64_t gpus_per_node) {
  AffinitySolution sol;
  sol.placement = std::move(placement);
  sol.cross_device = count_hops(c, sol.placement, 1);
  sol.cross_node = count_hops(c, sol.placement, gpus_per_node);
  return sol;
}

}  // namespace

int64_t AffinityCounts::total() const {
  return std::accumulate(weights.begin(), weights.end(), int64_t{0});
}

double HopCount::fraction() const {
  return total > 0 ? static_cast<double>(hops) / static_cast<double>(total) : 0.0;
}

absl::StatusOr<AffinityCounts> affinity_counts_from_routing(const RoutingTable& table,
                                                            int64_t num_layers,
                                                            int64_t num_experts) {
  if (auto s = validate_dims("affinity counts from routing", num_layers, num_experts); !s.ok()) {
    return s;
  }
  for (const auto& [key, choice] : table) {
    const auto& [request, position, block] = key;
    auto where = [&] {
      return absl::StrCat("affinity counts from routing: row (request ", request, ", position ",
                          position, ", block ", block, ")");
    };
    if (block < 0 || block >= num_layers) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": block outside [0, num_layers=", num_layers, ")"));
    }
    if (choice.experts.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where(), ": empty top-k list"));
    }
    for (size_t a = 0; a < choice.experts.size(); ++a) {
      const int32_t e = choice.experts[a];
      if (e < 0 || e >= num_experts) {
        return absl::InvalidArgumentError(
            absl::StrCat(where(), ": expert ", e, " outside [0, num_experts=", num_experts, ")"));
      }
      for (size_t b = 0; b < a; ++b) {
        if (choice.experts[b] == e) {
          return absl::InvalidArgumentError(
              absl::StrCat(where(), ": expert ", e, " appears twice in the top-k list"));
        }
      }
    }
  }
  AffinityCounts c;
  c.num_layers = num_layers;
  c.num_experts = num_experts;
  c.weights.assign(static_cast<size_t>((num_layers - 1) * num_experts * num_experts), 0);
  // The map is sorted by (request, position, block): a token's blocks are adjacent, ascending.
  const RoutingTable::value_type* prev = nullptr;
  for (const auto& row : table) {
    if (prev != nullptr) {
      const auto& [pr, pp, pb] = prev->first;
      const auto& [r, p, b] = row.first;
      if (pr == r && pp == p && b == pb + 1) {
        const int32_t top1 = prev->second.experts.front();
        for (int32_t j : row.second.experts) ++c.at(pb, top1, j);
      }
    }
    prev = &row;
  }
  return c;
}

absl::StatusOr<AffinityCounts> affinity_counts_from_paths(
    const std::vector<std::vector<int32_t>>& paths, int64_t num_layers, int64_t num_experts) {
  if (auto s = validate_dims("affinity counts from paths", num_layers, num_experts); !s.ok()) {
    return s;
  }
  for (size_t t = 0; t < paths.size(); ++t) {
    if (static_cast<int64_t>(paths[t].size()) != num_layers) {
      return absl::InvalidArgumentError(absl::StrCat("affinity counts from paths: token ", t,
                                                     " has ", paths[t].size(),
                                                     " blocks, expected num_layers=", num_layers));
    }
    for (size_t s = 0; s < paths[t].size(); ++s) {
      if (paths[t][s] < 0 || paths[t][s] >= num_experts) {
        return absl::InvalidArgumentError(
            absl::StrCat("affinity counts from paths: token ", t, " block ", s, ": expert ",
                         paths[t][s], " outside [0, num_experts=", num_experts, ")"));
      }
    }
  }
  AffinityCounts c;
  c.num_layers = num_layers;
  c.num_experts = num_experts;
  c.weights.assign(static_cast<size_t>((num_layers - 1) * num_experts * num_experts), 0);
  for (const auto& path : paths) {
    for (int64_t s = 0; s + 1 < num_layers; ++s) {
      ++c.at(s, path[static_cast<size_t>(s)], path[static_cast<size_t>(s + 1)]);
    }
  }
  return c;
}

absl::StatusOr<AffinityPlacement> round_robin_placement(int64_t num_layers, int64_t num_experts,
                                                        int64_t num_devices) {
  if (auto s = validate_dims("round robin placement", num_layers, num_experts); !s.ok()) return s;
  if (num_devices < 1 || num_devices > num_experts || num_experts % num_devices != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("round robin placement: num_devices=", num_devices,
                     " must be >= 1 and divide num_experts=", num_experts));
  }
  AffinityPlacement p;
  p.num_devices = num_devices;
  p.expert_device.assign(static_cast<size_t>(num_layers),
                         std::vector<int64_t>(static_cast<size_t>(num_experts)));
  for (auto& row : p.expert_device) {
    for (int64_t e = 0; e < num_experts; ++e) row[static_cast<size_t>(e)] = e % num_devices;
  }
  return p;
}

absl::StatusOr<HopCount> cross_device_hops(const AffinityCounts& counts,
                                           const AffinityPlacement& placement) {
  if (auto s = validate_counts(counts); !s.ok()) return s;
  if (auto s = validate_placement(counts, placement); !s.ok()) return s;
  return count_hops(counts, placement, 1);
}

absl::StatusOr<HopCount> cross_node_hops(const AffinityCounts& counts,
                                         const AffinityPlacement& placement,
                                         int64_t gpus_per_node) {
  if (auto s = validate_counts(counts); !s.ok()) return s;
  if (auto s = validate_placement(counts, placement); !s.ok()) return s;
  if (gpus_per_node < 1 || placement.num_devices % gpus_per_node != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cross_node_hops: gpus_per_node=", gpus_per_node,
                     " must be >= 1 and divide num_devices=", placement.num_devices));
  }
  return count_hops(counts, placement, gpus_per_node);
}

absl::StatusOr<AffinityPlan> plan_affinity_placement(const AffinityCounts& counts,
                                                     int64_t num_nodes, int64_t gpus_per_node,
                                                     const AffinityOptions& options) {
  const auto start = Clock::now();
  if (auto s = validate_counts(counts); !s.ok()) return s;
  const int64_t E = counts.num_experts;
  if (num_nodes < 1 || gpus_per_node < 1 || num_nodes > E || gpus_per_node > E ||
      E % (num_nodes * gpus_per_node) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "affinity placement: num_nodes=", num_nodes, " and gpus_per_node=", gpus_per_node,
        " must be >= 1 with num_nodes * gpus_per_node dividing num_experts=", E));
  }
  if (!std::isfinite(options.time_limit_s) || options.time_limit_s < 0.0 ||
      options.time_limit_s > 1e7) {
    return absl::InvalidArgumentError(
        absl::StrCat("affinity placement: time_limit_s must be finite and in [0, 1e7], got ",
                     options.time_limit_s));
  }
  if (options.num_restarts < 1 || options.num_restarts > 1'000'000 ||
      options.num_perturbations < 0 || options.num_perturbations > 1'000'000'000 ||
      options.max_swap_passes < 0 || options.max_swap_passes > 1'000'000'000 ||
      options.max_milp_nonzeros < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "affinity placement: need num_restarts in [1, 1e6], num_perturbations and ",
        "max_swap_passes in [0, 1e9], max_milp_nonzeros >= 1; got ", options.num_restarts, ", ",
        options.num_perturbations, ", ", options.max_swap_passes, ", ", options.max_milp_nonzeros));
  }
  const int64_t num_devices = num_nodes * gpus_per_node;
  AffinityPlan plan;
  auto rr = round_robin_placement(counts.num_layers, E, num_devices);
  MUFLOW_ASSERT(rr.ok(), "round robin placement of validated sizes failed");
  plan.round_robin = describe(counts, *std::move(rr), gpus_per_node);
  plan.round_robin.relative_gap = std::numeric_limits<double>::quiet_NaN();

  // The heuristic always runs: it is the MILP's warm start and fallback.
  const auto heuristic_start = Clock::now();
  Staged heuristic = solve_staged(counts, num_nodes, gpus_per_node, options, false, start);
  AffinitySolution heuristic_sol = describe(counts, heuristic.placement, gpus_per_node);
  heuristic_sol.optimal = false;
  heuristic_sol.relative_gap = std::numeric_limits<double>::quiet_NaN();
  heuristic_sol.wall_s = seconds_between(heuristic_start, Clock::now());

  if (options.method != AffinityMethod::kHeuristic) {
    const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(options.time_limit_s));
    Staged milp = solve_staged(counts, num_nodes, gpus_per_node, options, true, deadline);
    AffinitySolution sol = describe(counts, std::move(milp.placement), gpus_per_node);
    sol.optimal = milp.optimal;
    sol.relative_gap = milp.gap;
    if (std::tie(heuristic_sol.cross_node.hops, heuristic_sol.cross_device.hops) <
        std::tie(sol.cross_node.hops, sol.cross_device.hops)) {
      sol = describe(counts, heuristic_sol.placement, gpus_per_node);
      sol.optimal = false;
      sol.relative_gap = std::numeric_limits<double>::quiet_NaN();
    }
    sol.wall_s = seconds_between(start, Clock::now());
    plan.milp = std::move(sol);
  }
  if (options.method != AffinityMethod::kMilp) plan.heuristic = std::move(heuristic_sol);
  return plan;
}

}  // namespace muflow::engine
