#include "engine/planning/affinity_placement.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/planning/affinity_heuristic.hpp"
#include "engine/planning/affinity_milp.hpp"
#include "engine/planning/affinity_subproblem.hpp"
#include "engine/seconds_between.hpp"
#include "kernels/assert.hpp"

namespace muflow::engine::planning {
namespace {

using namespace affinity_detail;  // the per-pass solvers (affinity_*.hpp)

using Clock = std::chrono::steady_clock;

constexpr int64_t kMaxDim = int64_t{1} << 20;

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

absl::StatusOr<AffinityCounts> affinity_counts_from_routing(const routing::RoutingTable& table,
                                                            int64_t num_layers,
                                                            int64_t num_experts) {
  if (auto s = validate_dims("affinity counts from routing", num_layers, num_experts); !s.ok()) {
    return s;
  }
  for (const auto& entry : table) {
    const auto& key = entry.first;
    const auto& choice = entry.second;
    const auto& [request, position, block] = key;
    // Captures `key`, not the bindings: clang before 16 cannot capture structured bindings.
    auto where = [&key] {
      const auto& [r, p, b] = key;
      return absl::StrCat("affinity counts from routing: row (request ", r, ", position ", p,
                          ", block ", b, ")");
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
  const routing::RoutingTable::value_type* prev = nullptr;
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

}  // namespace muflow::engine::planning
