// Tests for engine/planning/affinity_placement.hpp: ExFlow affinity counts, the cross-device objective,
// the staged MILP (ExFlow §IV-C/D, NOTES.md) and the greedy + swap heuristic.
//
// Optimality is checked against an exhaustive search: placements are chosen per block among all
// balanced assignments, and the objective is a sum over consecutive block pairs, so a dynamic
// program over blocks (states = balanced assignments of one block) finds the exact minimum.

#include "engine/planning/affinity_placement.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/reference/test_inputs.hpp"

namespace muflow::engine {
namespace {

using kernels::reference::SplitMix64;
using kernels::reference::test_seed;
using Paths = std::vector<std::vector<int32_t>>;
using Key = std::pair<int64_t, int64_t>;  // (cross-node hops, cross-device hops)

int64_t below(SplitMix64& rng, int64_t n) {
  return static_cast<int64_t>(rng.next() % static_cast<uint64_t>(n));
}

// Paths with planted affinity: block s + 1's expert is chain[s][previous] with probability
// `follow`, else uniform. The chains are random permutations, so round robin does not match them.
Paths planted_paths(uint64_t seed, int64_t num_tokens, int64_t L, int64_t E, double follow) {
  SplitMix64 rng(seed);
  std::vector<std::vector<int32_t>> chain(static_cast<size_t>(L));
  for (auto& perm : chain) {
    perm.resize(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) perm[static_cast<size_t>(e)] = static_cast<int32_t>(e);
    for (int64_t i = E - 1; i > 0; --i)
      std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(below(rng, i + 1))]);
  }
  Paths paths(static_cast<size_t>(num_tokens));
  for (auto& path : paths) {
    path.resize(static_cast<size_t>(L));
    path[0] = static_cast<int32_t>(below(rng, E));
    for (int64_t s = 1; s < L; ++s) {
      const bool keep = rng.uniform(0.0f, 1.0f) < follow;
      path[static_cast<size_t>(s)] =
          keep
              ? chain[static_cast<size_t>(s)][static_cast<size_t>(path[static_cast<size_t>(s - 1)])]
              : static_cast<int32_t>(below(rng, E));
    }
  }
  return paths;
}

planning::AffinityCounts counts_of(const Paths& paths, int64_t L, int64_t E) {
  auto c = planning::affinity_counts_from_paths(paths, L, E);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

void expect_balanced(const planning::AffinityCounts& c, const planning::AffinityPlacement& p,
                     int64_t G) {
  EXPECT_EQ(p.num_devices, G);
  EXPECT_TRUE(planning::cross_device_hops(c, p).ok()) << planning::cross_device_hops(c, p).status();
}

Key key_of(const planning::AffinitySolution& s) { return {s.cross_node.hops, s.cross_device.hops}; }

// All balanced assignments of E experts to G devices (E / G each).
std::vector<std::vector<int64_t>> balanced_assignments(int64_t E, int64_t G) {
  std::vector<std::vector<int64_t>> all;
  std::vector<int64_t> cur(static_cast<size_t>(E));
  std::vector<int64_t> load(static_cast<size_t>(G));
  std::function<void(int64_t)> rec = [&](int64_t e) {
    if (e == E) {
      all.push_back(cur);
      return;
    }
    for (int64_t d = 0; d < G; ++d) {
      if (load[static_cast<size_t>(d)] == E / G) continue;
      ++load[static_cast<size_t>(d)];
      cur[static_cast<size_t>(e)] = d;
      rec(e + 1);
      --load[static_cast<size_t>(d)];
    }
  };
  rec(0);
  return all;
}

// Exact lexicographic minimum of (cross-node, cross-device) hops over all balanced placements
// on num_nodes × gpus_per_node devices, by dynamic programming over blocks. When `node_of` is
// given, only placements whose node of (s, e) is node_of[s][e] are allowed.
Key brute_force(const planning::AffinityCounts& c, int64_t num_nodes, int64_t gpus_per_node,
                const std::vector<std::vector<int64_t>>* node_of = nullptr) {
  const int64_t L = c.num_layers, E = c.num_experts, g = gpus_per_node;
  const auto states = balanced_assignments(E, num_nodes * g);
  const Key inf{std::numeric_limits<int64_t>::max() / 4, 0};
  auto allowed = [&](int64_t s, const std::vector<int64_t>& a) {
    if (node_of == nullptr) return true;
    for (int64_t e = 0; e < E; ++e) {
      if (a[static_cast<size_t>(e)] / g !=
          (*node_of)[static_cast<size_t>(s)][static_cast<size_t>(e)])
        return false;
    }
    return true;
  };
  std::vector<Key> best(states.size());
  for (size_t k = 0; k < states.size(); ++k) best[k] = allowed(0, states[k]) ? Key{0, 0} : inf;
  for (int64_t s = 0; s + 1 < L; ++s) {
    std::vector<Key> next(states.size(), inf);
    for (size_t b = 0; b < states.size(); ++b) {
      if (!allowed(s + 1, states[b])) continue;
      for (size_t a = 0; a < states.size(); ++a) {
        if (best[a] == inf) continue;
        Key cost = best[a];
        for (int64_t i = 0; i < E; ++i) {
          for (int64_t j = 0; j < E; ++j) {
            const int64_t w = c.at(s, i, j);
            if (w == 0) continue;
            const int64_t di = states[a][static_cast<size_t>(i)],
                          dj = states[b][static_cast<size_t>(j)];
            if (di / g != dj / g) cost.first += w;
            if (di != dj) cost.second += w;
          }
        }
        next[b] = std::min(next[b], cost);
      }
    }
    best = std::move(next);
  }
  return *std::min_element(best.begin(), best.end());
}

// ---------------------------------------------------------------------------------------------

// L = 3 blocks, E = 4 experts, G = 2 devices. Transitions (i → j: tokens):
//   boundary 0: 0→1: 5, 1→1: 3, 2→3: 2, 3→0: 4;   boundary 1: 1→2: 6, 0→3: 1.   Total 21.
// Placement P: block 0 [0,1,0,1], block 1 [0,0,1,1], block 2 [1,0,0,1].
//   0→1: dev 0 → dev 0 stays; 1→1: 1 → 0 hop 3; 2→3: 0 → 1 hop 2; 3→0: 1 → 0 hop 4;
//   1→2: 0 → 0 stays; 0→3: 0 → 1 hop 1.  Hops = 3 + 2 + 4 + 1 = 10.
// Round robin (every block [0,1,0,1]): 0→1 hop 5; 1→1 stays; 2→3 hop 2; 3→0 hop 4; 1→2 hop 6;
//   0→3 hop 1.  Hops = 18.
planning::AffinityCounts hand_counts() {
  planning::AffinityCounts c{3, 4, std::vector<int64_t>(2 * 4 * 4, 0)};
  c.at(0, 0, 1) = 5;
  c.at(0, 1, 1) = 3;
  c.at(0, 2, 3) = 2;
  c.at(0, 3, 0) = 4;
  c.at(1, 1, 2) = 6;
  c.at(1, 0, 3) = 1;
  return c;
}

TEST(AffinityPlacement, ObjectiveOnHandMadeExample) {
  const planning::AffinityCounts c = hand_counts();
  EXPECT_EQ(c.total(), 21);
  const planning::AffinityPlacement p{2, {{0, 1, 0, 1}, {0, 0, 1, 1}, {1, 0, 0, 1}}};
  auto h = planning::cross_device_hops(c, p);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(*h, (planning::HopCount{10, 21}));
  EXPECT_DOUBLE_EQ(h->fraction(), 10.0 / 21.0);
  auto rr = planning::round_robin_placement(3, 4, 2);
  ASSERT_TRUE(rr.ok());
  EXPECT_EQ(planning::cross_device_hops(c, *rr)->hops, 18);
  // One node of two GPUs: no cross-node hops; one GPU per node: nodes are devices.
  EXPECT_EQ(planning::cross_node_hops(c, p, 2)->hops, 0);
  EXPECT_EQ(planning::cross_node_hops(c, p, 1)->hops, 10);
  EXPECT_EQ((planning::HopCount{0, 0}).fraction(), 0.0);
}

TEST(AffinityPlacement, RoundRobin) {
  auto p = planning::round_robin_placement(2, 6, 3);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->num_devices, 3);
  EXPECT_EQ(p->expert_device,
            (std::vector<std::vector<int64_t>>{{0, 1, 2, 0, 1, 2}, {0, 1, 2, 0, 1, 2}}));
  EXPECT_FALSE(planning::round_robin_placement(2, 6, 4).ok());  // 4 does not divide 6
  EXPECT_FALSE(planning::round_robin_placement(2, 6, 0).ok());
  EXPECT_FALSE(planning::round_robin_placement(0, 6, 3).ok());
}

TEST(AffinityPlacement, ValidationErrors) {
  const planning::AffinityCounts c = hand_counts();
  auto invalid = [](const auto& r) {
    return !r.ok() && r.status().code() == absl::StatusCode::kInvalidArgument;
  };
  // Placement: G not dividing E, wrong number of blocks, ragged row, device out of range,
  // unbalanced block.
  EXPECT_TRUE(
      invalid(planning::cross_device_hops(c, {3, {{0, 1, 2, 0}, {0, 1, 2, 0}, {0, 1, 2, 0}}})));
  EXPECT_TRUE(invalid(planning::cross_device_hops(c, {2, {{0, 1, 0, 1}, {0, 1, 0, 1}}})));
  EXPECT_TRUE(
      invalid(planning::cross_device_hops(c, {2, {{0, 1, 0, 1}, {0, 1, 0}, {0, 1, 0, 1}}})));
  EXPECT_TRUE(
      invalid(planning::cross_device_hops(c, {2, {{0, 1, 0, 2}, {0, 1, 0, 1}, {0, 1, 0, 1}}})));
  EXPECT_TRUE(
      invalid(planning::cross_device_hops(c, {2, {{0, 0, 0, 1}, {0, 1, 0, 1}, {0, 1, 0, 1}}})));
  const planning::AffinityPlacement ok{2, {{0, 1, 0, 1}, {0, 1, 0, 1}, {0, 1, 0, 1}}};
  EXPECT_TRUE(invalid(planning::cross_node_hops(c, ok, 0)));
  EXPECT_TRUE(
      invalid(planning::cross_node_hops(c, {4, {{0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3}}}, 3)));
  // Counts: wrong size, negative weight, zero experts.
  planning::AffinityCounts bad = c;
  bad.weights.pop_back();
  EXPECT_TRUE(invalid(planning::cross_device_hops(bad, ok)));
  bad = c;
  bad.at(1, 2, 2) = -1;
  EXPECT_TRUE(invalid(planning::cross_device_hops(bad, ok)));
  EXPECT_TRUE(invalid(planning::plan_affinity_placement(bad, 1, 2)));
  EXPECT_TRUE(invalid(planning::plan_affinity_placement(planning::AffinityCounts{}, 1, 1)));
  // Plan: N·g not dividing E, zero nodes, bad options.
  EXPECT_TRUE(invalid(planning::plan_affinity_placement(c, 3, 1)));
  EXPECT_TRUE(invalid(planning::plan_affinity_placement(c, 2, 4)));
  EXPECT_TRUE(invalid(planning::plan_affinity_placement(c, 0, 2)));
  planning::AffinityOptions o;
  o.time_limit_s = -1;
  EXPECT_TRUE(invalid(planning::plan_affinity_placement(c, 1, 2, o)));
  o.time_limit_s = std::nan("");
  EXPECT_TRUE(invalid(planning::plan_affinity_placement(c, 1, 2, o)));
  o = {};
  o.num_restarts = 0;
  EXPECT_TRUE(invalid(planning::plan_affinity_placement(c, 1, 2, o)));
  // Paths: wrong length, expert out of range, bad sizes.
  EXPECT_TRUE(invalid(planning::affinity_counts_from_paths({{0, 1, 2}, {0, 1}}, 3, 4)));
  EXPECT_TRUE(invalid(planning::affinity_counts_from_paths({{0, 1, 4}}, 3, 4)));
  EXPECT_TRUE(invalid(planning::affinity_counts_from_paths({{0, -1, 3}}, 3, 4)));
  EXPECT_TRUE(invalid(planning::affinity_counts_from_paths({}, 0, 4)));
}

TEST(AffinityPlacement, CountsFromPaths) {
  auto c = planning::affinity_counts_from_paths({{0, 1, 2}, {0, 1, 3}, {3, 3, 3}}, 3, 4);
  ASSERT_TRUE(c.ok()) << c.status();
  planning::AffinityCounts expected{3, 4, std::vector<int64_t>(2 * 4 * 4, 0)};
  expected.at(0, 0, 1) = 2;
  expected.at(1, 1, 2) = 1;
  expected.at(1, 1, 3) = 1;
  expected.at(0, 3, 3) = 1;
  expected.at(1, 3, 3) = 1;
  EXPECT_EQ(*c, expected);
  // One block: no boundaries, empty weights.
  auto one = planning::affinity_counts_from_paths({{2}}, 1, 4);
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(one->weights.empty());
}

TEST(AffinityPlacement, CountsFromRoutingTableTopK) {
  routing::RoutingTable t;
  auto add = [&](int64_t r, int64_t pos, int32_t block, std::vector<int32_t> experts) {
    t[{r, pos, block}] = routing::RoutingChoice{experts, std::vector<float>(experts.size(), 0.5f)};
  };
  // Token (0, 0): blocks 0, 1, 2 with top-2 lists; the top-1 at s is the list's first entry.
  add(0, 0, 0, {1, 3});
  add(0, 0, 1, {2, 0});
  add(0, 0, 2, {3, 1});
  // Token (0, 1): blocks 0 and 2 only (block 1 missing): no pair, nothing counted.
  add(0, 1, 0, {0, 1});
  add(0, 1, 2, {1, 2});
  // Token (0, 2) has block 1 only and token (0, 3) block 2 only: adjacent rows of the table with
  // consecutive blocks, but different tokens, so nothing is counted.
  add(0, 2, 1, {0, 1});
  add(0, 3, 2, {2, 3});
  // Token (1, 0): blocks 1, 2.
  add(1, 0, 1, {3, 2});
  add(1, 0, 2, {2, 1});
  auto c = planning::affinity_counts_from_routing(t, 3, 4);
  ASSERT_TRUE(c.ok()) << c.status();
  planning::AffinityCounts expected{3, 4, std::vector<int64_t>(2 * 4 * 4, 0)};
  expected.at(0, 1, 2) = 1;  // token (0,0): top-1 of block 0 is 1 → {2, 0}
  expected.at(0, 1, 0) = 1;
  expected.at(1, 2, 3) = 1;  // token (0,0): top-1 of block 1 is 2 → {3, 1}
  expected.at(1, 2, 1) = 1;
  expected.at(1, 3, 2) = 1;  // token (1,0): top-1 of block 1 is 3 → {2, 1}
  expected.at(1, 3, 1) = 1;
  EXPECT_EQ(*c, expected);
  EXPECT_EQ(c->total(), 6);

  auto invalid = [](const routing::RoutingTable& table) {
    auto r = planning::affinity_counts_from_routing(table, 3, 4);
    return !r.ok() && r.status().code() == absl::StatusCode::kInvalidArgument;
  };
  routing::RoutingTable bad;
  bad[{0, 0, 3}] = routing::RoutingChoice{{0}, {1.0f}};  // block outside [0, 3)
  EXPECT_TRUE(invalid(bad));
  bad.clear();
  bad[{0, 0, 0}] = routing::RoutingChoice{{4}, {1.0f}};  // expert outside [0, 4)
  EXPECT_TRUE(invalid(bad));
  bad.clear();
  bad[{0, 0, 0}] = routing::RoutingChoice{{1, 1}, {0.5f, 0.5f}};  // duplicate expert
  EXPECT_TRUE(invalid(bad));
  bad.clear();
  bad[{0, 0, 0}] = routing::RoutingChoice{{}, {}};  // empty top-k
  EXPECT_TRUE(invalid(bad));
  EXPECT_FALSE(planning::affinity_counts_from_routing(t, 3, 0).ok());
}

TEST(AffinityPlacement, HandMadeExampleIsSolvedExactly) {
  const planning::AffinityCounts c = hand_counts();
  auto plan = planning::plan_affinity_placement(c, 1, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Key best = brute_force(c, 1, 2);
  ASSERT_TRUE(plan->milp && plan->heuristic);
  EXPECT_EQ(plan->milp->cross_device.hops, best.second);
  EXPECT_TRUE(plan->milp->optimal);
  EXPECT_EQ(plan->milp->relative_gap, 0.0);
  EXPECT_EQ(plan->round_robin.cross_device.hops, 18);
  expect_balanced(c, plan->milp->placement, 2);
  expect_balanced(c, plan->heuristic->placement, 2);
}

struct SmallCase {
  int64_t L, E, num_nodes, gpus_per_node, num_tokens;
  double follow = 0.7;  // probability that a token follows its planted chain
};

// MILP = exhaustive optimum (lexicographic for two stages: cross-node hops minimal over all
// placements; cross-device hops minimal among placements with the MILP's node partition); the
// heuristic within 10% of the MILP here; both balanced and both beat round robin.
TEST(AffinityPlacement, MilpMatchesExhaustiveSearchOnSmallInstances) {
  const uint64_t seed = test_seed("AffinityPlacement.MilpMatchesExhaustiveSearch", 20240617);
  const std::vector<SmallCase> cases = {
      {3, 4, 1, 2, 200},      {4, 4, 1, 2, 300},      {4, 8, 1, 2, 400},      {3, 4, 2, 1, 200},
      {3, 6, 3, 1, 300},      {3, 6, 1, 3, 300},      {3, 4, 2, 2, 300},      {4, 4, 1, 4, 300},
      {4, 8, 1, 2, 400, 0.3}, {3, 6, 1, 3, 300, 0.3}, {3, 4, 2, 2, 300, 0.3},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    const SmallCase& sc = cases[k];
    SCOPED_TRACE(testing::Message()
                 << "case " << k << ": L=" << sc.L << " E=" << sc.E << " nodes=" << sc.num_nodes
                 << " gpus/node=" << sc.gpus_per_node << " follow=" << sc.follow);
    const planning::AffinityCounts c =
        counts_of(planted_paths(seed + k, sc.num_tokens, sc.L, sc.E, sc.follow), sc.L, sc.E);
    planning::AffinityOptions o;
    o.time_limit_s = 20;
    o.seed = seed;
    auto plan = planning::plan_affinity_placement(c, sc.num_nodes, sc.gpus_per_node, o);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(plan->milp && plan->heuristic);
    const planning::AffinitySolution& milp = *plan->milp;
    const planning::AffinitySolution& heur = *plan->heuristic;
    const int64_t G = sc.num_nodes * sc.gpus_per_node;
    expect_balanced(c, milp.placement, G);
    expect_balanced(c, heur.placement, G);
    EXPECT_TRUE(milp.optimal);
    EXPECT_EQ(milp.relative_gap, 0.0);
    const Key global = brute_force(c, sc.num_nodes, sc.gpus_per_node);
    EXPECT_EQ(milp.cross_node.hops, global.first);
    std::vector<std::vector<int64_t>> node_of = milp.placement.expert_device;
    for (auto& row : node_of) {
      for (auto& d : row) d /= sc.gpus_per_node;
    }
    EXPECT_EQ(milp.cross_device.hops,
              brute_force(c, sc.num_nodes, sc.gpus_per_node, &node_of).second);
    if (sc.num_nodes == 1 || sc.gpus_per_node == 1) {
      EXPECT_EQ(key_of(milp), global);
    }
    EXPECT_LE(key_of(milp), key_of(heur));
    EXPECT_LE(static_cast<double>(heur.cross_device.hops),
              1.10 * static_cast<double>(milp.cross_device.hops));
    EXPECT_LT(milp.cross_device.hops, plan->round_robin.cross_device.hops);
    EXPECT_LT(heur.cross_device.hops, plan->round_robin.cross_device.hops);
    std::printf(
        "[affinity] L=%lld E=%lld N=%lld g=%lld tokens=%lld follow=%.1f: hops milp=%lld (%.3f s, "
        "node %lld) "
        "heuristic=%lld (%.4f s, node %lld) round_robin=%lld (node %lld) of %lld\n",
        static_cast<long long>(sc.L), static_cast<long long>(sc.E),
        static_cast<long long>(sc.num_nodes), static_cast<long long>(sc.gpus_per_node),
        static_cast<long long>(sc.num_tokens), sc.follow,
        static_cast<long long>(milp.cross_device.hops), milp.wall_s,
        static_cast<long long>(milp.cross_node.hops),
        static_cast<long long>(heur.cross_device.hops), heur.wall_s,
        static_cast<long long>(heur.cross_node.hops),
        static_cast<long long>(plan->round_robin.cross_device.hops),
        static_cast<long long>(plan->round_robin.cross_node.hops),
        static_cast<long long>(milp.cross_device.total));
  }
}

// A larger instance under a 1 s budget: returns promptly with a valid placement no worse than
// the heuristic's (the bound is generous: GLPK checks its limit between LP steps).
TEST(AffinityPlacement, TimeLimitIsRespected) {
  const uint64_t seed = test_seed("AffinityPlacement.TimeLimitIsRespected", 7);
  const int64_t L = 8, E = 32;
  const planning::AffinityCounts c = counts_of(planted_paths(seed, 3000, L, E, 0.6), L, E);
  planning::AffinityOptions o;
  o.time_limit_s = 1.0;
  o.seed = seed;
  const auto start = std::chrono::steady_clock::now();
  auto plan = planning::plan_affinity_placement(c, 2, 4, o);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->milp && plan->heuristic);
  EXPECT_LT(wall, 10.0);
  expect_balanced(c, plan->milp->placement, 8);
  EXPECT_LE(key_of(*plan->milp), key_of(*plan->heuristic));
  EXPECT_LT(plan->milp->cross_device.hops, plan->round_robin.cross_device.hops);
  std::printf(
      "[affinity] L=8 E=32 2x4, 1 s limit: wall %.3f s, milp=%lld (optimal %d, gap %.3f) "
      "heuristic=%lld round_robin=%lld of %lld\n",
      wall, static_cast<long long>(plan->milp->cross_device.hops), plan->milp->optimal,
      plan->milp->relative_gap, static_cast<long long>(plan->heuristic->cross_device.hops),
      static_cast<long long>(plan->round_robin.cross_device.hops),
      static_cast<long long>(plan->round_robin.cross_device.total));

  // A mid-size instance whose root LP GLPK solves in time but whose search it cannot finish in
  // 1 s: a finite gap in [0, 1] is reported (0 only when optimality was proven).
  const planning::AffinityCounts mid = counts_of(planted_paths(seed + 1, 500, 5, 16, 0.5), 5, 16);
  auto mid_plan = planning::plan_affinity_placement(mid, 1, 2, o);
  ASSERT_TRUE(mid_plan.ok()) << mid_plan.status();
  ASSERT_TRUE(mid_plan->milp && mid_plan->heuristic);
  EXPECT_LT(mid_plan->milp->wall_s, 10.0);
  expect_balanced(mid, mid_plan->milp->placement, 2);
  EXPECT_LE(mid_plan->milp->cross_device.hops, mid_plan->heuristic->cross_device.hops);
  const double gap = mid_plan->milp->relative_gap;
  EXPECT_TRUE(std::isfinite(gap) && gap >= 0.0 && gap <= 1.0) << gap;
  if (mid_plan->milp->optimal) {
    EXPECT_EQ(gap, 0.0);
  }
  std::printf(
      "[affinity] L=5 E=16 1x2, 1 s limit: wall %.3f s, milp=%lld (optimal %d, gap %.3f) "
      "heuristic=%lld round_robin=%lld of %lld\n",
      mid_plan->milp->wall_s, static_cast<long long>(mid_plan->milp->cross_device.hops),
      mid_plan->milp->optimal, gap, static_cast<long long>(mid_plan->heuristic->cross_device.hops),
      static_cast<long long>(mid_plan->round_robin.cross_device.hops),
      static_cast<long long>(mid_plan->round_robin.cross_device.total));
}

// Switch-like sizes (12 blocks, 128 experts) with the heuristic only: plants affinity, checks
// balance and the gain over round robin, and prints the time (performance belongs in bench/;
// the assertion is only a hang guard).
TEST(AffinityPlacement, HeuristicOnSwitchSizes) {
  const uint64_t seed = test_seed("AffinityPlacement.HeuristicOnSwitchSizes", 11);
  const int64_t L = 12, E = 128;
  const planning::AffinityCounts c = counts_of(planted_paths(seed, 20000, L, E, 0.6), L, E);
  for (auto [N, g] : std::vector<std::pair<int64_t, int64_t>>{{1, 8}, {4, 4}, {8, 8}}) {
    planning::AffinityOptions o;
    o.method = planning::AffinityMethod::kHeuristic;
    o.seed = seed;
    auto plan = planning::plan_affinity_placement(c, N, g, o);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(plan->heuristic && !plan->milp);
    expect_balanced(c, plan->heuristic->placement, N * g);
    EXPECT_LT(plan->heuristic->cross_device.hops, plan->round_robin.cross_device.hops);
    EXPECT_LE(plan->heuristic->cross_node.hops, plan->round_robin.cross_node.hops);
    EXPECT_LT(plan->heuristic->wall_s, 30.0);
    std::printf(
        "[affinity] L=12 E=128 %lldx%lld heuristic: %.3f s, cross-device %.3f (round robin "
        "%.3f), cross-node %.3f (round robin %.3f)\n",
        static_cast<long long>(N), static_cast<long long>(g), plan->heuristic->wall_s,
        plan->heuristic->cross_device.fraction(), plan->round_robin.cross_device.fraction(),
        plan->heuristic->cross_node.fraction(), plan->round_robin.cross_node.fraction());
  }
}

TEST(AffinityPlacement, DeterministicAndEdgeCases) {
  const uint64_t seed = test_seed("AffinityPlacement.DeterministicAndEdgeCases", 3);
  const planning::AffinityCounts c = counts_of(planted_paths(seed, 500, 5, 16, 0.5), 5, 16);
  planning::AffinityOptions o;
  o.method = planning::AffinityMethod::kHeuristic;
  o.seed = seed;
  auto a = planning::plan_affinity_placement(c, 2, 2, o);
  auto b = planning::plan_affinity_placement(c, 2, 2, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->heuristic->placement, b->heuristic->placement);
  // MILP only: no heuristic reported.
  o.method = planning::AffinityMethod::kMilp;
  o.time_limit_s = 0.5;
  auto m = planning::plan_affinity_placement(c, 2, 2, o);
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->milp && !m->heuristic);
  expect_balanced(c, m->milp->placement, 4);
  // A zero budget keeps the heuristic's placement (no GLPK run, no bound).
  o.time_limit_s = 0.0;
  auto z = planning::plan_affinity_placement(c, 2, 2, o);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->milp->placement, a->heuristic->placement);
  EXPECT_FALSE(z->milp->optimal);
  EXPECT_TRUE(std::isnan(z->milp->relative_gap));
  // One block: nothing to optimise. One device: everything local.
  auto one = planning::affinity_counts_from_paths({{1}, {2}}, 1, 4);
  ASSERT_TRUE(one.ok());
  auto p1 = planning::plan_affinity_placement(*one, 2, 2);
  ASSERT_TRUE(p1.ok()) << p1.status();
  EXPECT_EQ(p1->milp->cross_device, (planning::HopCount{0, 0}));
  auto p2 = planning::plan_affinity_placement(c, 1, 1);
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(p2->milp->cross_device.hops, 0);
  EXPECT_TRUE(p2->milp->optimal);
  // All experts on their own device (E = G): still balanced.
  planning::AffinityOptions quick;
  quick.time_limit_s = 0.5;
  auto p3 = planning::plan_affinity_placement(c, 4, 4, quick);
  ASSERT_TRUE(p3.ok()) << p3.status();
  expect_balanced(c, p3->milp->placement, 16);
}

}  // namespace
}  // namespace muflow::engine
