#include "engine/planning/aurora_placement.hpp"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/max_cardinality_matching.hpp>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kernels/assert.hpp"

namespace muflow::engine::planning {
namespace {

using MatchingGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;
using MatchingVertex = boost::graph_traits<MatchingGraph>::vertex_descriptor;

size_t idx(int64_t i) { return static_cast<size_t>(i); }

absl::Status check_loads(absl::string_view fn, absl::string_view what,
                         const std::vector<double>& loads) {
  for (size_t i = 0; i < loads.size(); ++i) {
    if (!std::isfinite(loads[i]) || loads[i] < 0.0) {
      return absl::InvalidArgumentError(
          absl::StrCat(fn, ": ", what, "[", i, "] = ", loads[i], ", expected a finite value >= 0"));
    }
  }
  return absl::OkStatus();
}

absl::Status check_traffic(absl::string_view fn, absl::string_view what,
                           const std::vector<ExpertTraffic>& traffic) {
  for (size_t i = 0; i < traffic.size(); ++i) {
    for (const double v : {traffic[i].send, traffic[i].recv}) {
      if (!std::isfinite(v) || v < 0.0) {
        return absl::InvalidArgumentError(absl::StrCat(fn, ": ", what, "[", i, "] = {send ",
                                                       traffic[i].send, ", recv ", traffic[i].recv,
                                                       "}, expected finite values >= 0"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status check_speeds(absl::string_view fn, const std::vector<double>& speeds) {
  for (size_t g = 0; g < speeds.size(); ++g) {
    if (!std::isfinite(speeds[g]) || speeds[g] <= 0.0) {
      return absl::InvalidArgumentError(
          absl::StrCat(fn, ": speeds[", g, "] = ", speeds[g], ", expected a finite value > 0"));
    }
  }
  return absl::OkStatus();
}

absl::Status check_same_size(absl::string_view fn, absl::string_view what_a, size_t size_a,
                             absl::string_view what_b, size_t size_b) {
  if (size_a != size_b) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": ", what_a, " has ", size_a,
                                                   " entries but ", what_b, " has ", size_b,
                                                   "; both must have one entry per GPU"));
  }
  return absl::OkStatus();
}

// Indices [0, n) ordered by `values`, descending or ascending; ties to the lower index.
std::vector<int64_t> order_by(const std::vector<double>& values, bool descending) {
  std::vector<int64_t> order(values.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return descending ? values[idx(x)] > values[idx(y)] : values[idx(x)] < values[idx(y)];
  });
  return order;
}

// A maximum matching of the bipartite graph {rows} x {columns} restricted to the edges with
// weight <= threshold. Fills `col_of_row` (-1 for an unmatched row) and returns the number of
// matched rows. Boost's Edmonds matching works on general graphs; ours is bipartite with rows
// as vertices [0, n) and columns as vertices [n, 2n).
int64_t max_matching_below(const std::vector<std::vector<double>>& weights, double threshold,
                           std::vector<int64_t>& col_of_row) {
  const int64_t n = static_cast<int64_t>(weights.size());
  MatchingGraph graph(idx(2 * n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      if (weights[idx(i)][idx(j)] <= threshold) boost::add_edge(idx(i), idx(n + j), graph);
    }
  }
  std::vector<MatchingVertex> mate(idx(2 * n));
  boost::edmonds_maximum_cardinality_matching(graph, mate.data());
  const MatchingVertex none = boost::graph_traits<MatchingGraph>::null_vertex();
  col_of_row.assign(idx(n), -1);
  int64_t matched = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (mate[idx(i)] == none) continue;
    const int64_t col = static_cast<int64_t>(mate[idx(i)]) - n;
    MUFLOW_ASSERT(col >= 0 && col < n, "bipartite matching paired two rows");
    col_of_row[idx(i)] = col;
    ++matched;
  }
  return matched;
}

// Rewrites the perfect matching `col_of_row` of the graph `allowed` into the lexicographically
// smallest perfect matching of that graph. Row by row, row i takes the smallest column j for
// which a perfect matching with rows < i fixed still exists; given the current matching M that
// holds iff j's owner r > i can reach column M[i] by an alternating path through rows > i
// (symmetric difference of two perfect matchings). One breadth-first search per row: O(n^3).
void make_lexicographically_smallest(const std::vector<std::vector<char>>& allowed,
                                     std::vector<int64_t>& col_of_row) {
  const int64_t n = static_cast<int64_t>(col_of_row.size());
  std::vector<int64_t> row_of_col(idx(n));
  for (int64_t i = 0; i < n; ++i) row_of_col[idx(col_of_row[idx(i)])] = i;
  std::vector<int64_t> next_col(idx(n));  // column a reachable row moves to; -1: unreachable
  std::vector<int64_t> queue;
  queue.reserve(idx(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t target = col_of_row[idx(i)];
    std::fill(next_col.begin(), next_col.end(), -1);
    queue.assign(1, target);
    for (size_t head = 0; head < queue.size(); ++head) {
      const int64_t col = queue[head];
      for (int64_t r = i + 1; r < n; ++r) {
        if (next_col[idx(r)] != -1 || !allowed[idx(r)][idx(col)]) continue;
        next_col[idx(r)] = col;  // r can hand its column over and take `col`
        queue.push_back(col_of_row[idx(r)]);
      }
    }
    int64_t best = target;
    for (int64_t j = 0; j < target; ++j) {
      const int64_t owner = row_of_col[idx(j)];
      if (allowed[idx(i)][idx(j)] && owner > i && next_col[idx(owner)] != -1) {
        best = j;
        break;
      }
    }
    if (best == target) continue;
    // Row i takes `best`; its owner moves along its path until someone takes `target`.
    int64_t row = row_of_col[idx(best)];
    col_of_row[idx(i)] = best;
    row_of_col[idx(best)] = i;
    for (int64_t steps = 0;; ++steps) {
      MUFLOW_ASSERT(steps < n, "alternating path does not reach the freed column");
      const int64_t col = next_col[idx(row)];
      const int64_t previous_owner = row_of_col[idx(col)];
      col_of_row[idx(row)] = col;
      row_of_col[idx(col)] = row;
      if (col == target) break;
      row = previous_owner;
    }
  }
}

ColocationPlan plan_from_partner(const std::vector<ExpertTraffic>& a,
                                 const std::vector<ExpertTraffic>& b,
                                 const std::vector<int64_t>& b_of_a) {
  ColocationPlan plan;
  plan.pairs.resize(a.size());
  plan.gpu_cost.resize(a.size());
  for (size_t g = 0; g < a.size(); ++g) {
    plan.pairs[g] = ExpertPair{static_cast<int64_t>(g), b_of_a[g]};
    plan.gpu_cost[g] = pair_cost(a[g], b[idx(b_of_a[g])]);
    plan.max_cost = g == 0 ? plan.gpu_cost[g] : std::max(plan.max_cost, plan.gpu_cost[g]);
  }
  return plan;
}

}  // namespace

absl::StatusOr<CapabilityAssignment> assign_by_capability(const std::vector<double>& loads,
                                                          const std::vector<double>& speeds,
                                                          int64_t experts_per_gpu) {
  constexpr absl::string_view kFn = "assign_by_capability";
  if (experts_per_gpu < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kFn, ": experts_per_gpu must be >= 1, got ", experts_per_gpu));
  }
  const int64_t num_experts = static_cast<int64_t>(loads.size());
  const int64_t num_gpus = static_cast<int64_t>(speeds.size());
  if (num_experts % experts_per_gpu != 0 || num_experts / experts_per_gpu != num_gpus) {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": num_experts (", num_experts,
                                                   ") must equal num_gpus (", num_gpus,
                                                   ") * experts_per_gpu (", experts_per_gpu, ")"));
  }
  if (absl::Status s = check_loads(kFn, "loads", loads); !s.ok()) return s;
  if (absl::Status s = check_speeds(kFn, speeds); !s.ok()) return s;

  const std::vector<int64_t> expert_order = order_by(loads, /*descending=*/true);
  const std::vector<int64_t> gpu_order = order_by(speeds, /*descending=*/true);
  CapabilityAssignment out;
  out.gpu_of_expert.resize(loads.size());
  std::vector<double> gpu_load(speeds.size(), 0.0);
  for (int64_t k = 0; k < num_experts; ++k) {
    const int64_t expert = expert_order[idx(k)];
    const int64_t gpu = gpu_order[idx(k / experts_per_gpu)];
    out.gpu_of_expert[idx(expert)] = gpu;
    gpu_load[idx(gpu)] += loads[idx(expert)];
  }
  out.gpu_time.resize(speeds.size());
  for (size_t g = 0; g < speeds.size(); ++g) {
    out.gpu_time[g] = gpu_load[g] / speeds[g];
    out.max_time = std::max(out.max_time, out.gpu_time[g]);
  }
  return out;
}

absl::StatusOr<BottleneckMatching> bottleneck_matching(
    const std::vector<std::vector<double>>& weights) {
  const size_t n = weights.size();
  std::vector<double> values;
  values.reserve(n * n);
  for (size_t i = 0; i < n; ++i) {
    if (weights[i].size() != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("bottleneck_matching: weights must be square, but row ", i, " has ",
                       weights[i].size(), " entries and there are ", n, " rows"));
    }
    for (size_t j = 0; j < n; ++j) {
      if (std::isnan(weights[i][j])) {
        return absl::InvalidArgumentError(
            absl::StrCat("bottleneck_matching: weights[", i, "][", j, "] is NaN"));
      }
      values.push_back(weights[i][j]);
    }
  }
  BottleneckMatching out;
  if (n == 0) return out;
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());

  // The largest weight admits the complete bipartite graph, so a perfect matching exists there;
  // find the smallest feasible threshold. Invariant: values[hi] is feasible.
  std::vector<int64_t> col_of_row;
  size_t lo = 0, hi = values.size() - 1;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (max_matching_below(weights, values[mid], col_of_row) == static_cast<int64_t>(n)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  const double threshold = values[hi];
  const int64_t matched = max_matching_below(weights, threshold, col_of_row);
  MUFLOW_ASSERT(matched == static_cast<int64_t>(n), "no perfect matching at the threshold");

  std::vector<std::vector<char>> allowed(n, std::vector<char>(n, 0));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) allowed[i][j] = weights[i][j] <= threshold ? 1 : 0;
  }
  make_lexicographically_smallest(allowed, col_of_row);

  out.col_of_row = std::move(col_of_row);
  out.bottleneck = weights[0][idx(out.col_of_row[0])];
  for (size_t i = 0; i < n; ++i) {
    out.bottleneck = std::max(out.bottleneck, weights[i][idx(out.col_of_row[i])]);
  }
  MUFLOW_ASSERT(out.bottleneck == threshold, "matching bottleneck differs from the threshold");
  return out;
}

absl::StatusOr<std::vector<ExpertTraffic>> expert_traffic_from_matrix(
    const std::vector<std::vector<double>>& traffic) {
  const size_t n = traffic.size();
  std::vector<ExpertTraffic> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (traffic[i].size() != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("expert_traffic_from_matrix: traffic must be square, but row ", i, " has ",
                       traffic[i].size(), " entries and there are ", n, " rows"));
    }
    for (size_t j = 0; j < n; ++j) {
      const double d = traffic[i][j];
      if (!std::isfinite(d) || d < 0.0) {
        return absl::InvalidArgumentError(absl::StrCat("expert_traffic_from_matrix: traffic[", i,
                                                       "][", j, "] = ", d,
                                                       ", expected a finite value >= 0"));
      }
      out[i].send += d;  // a_i = Σ_j d_ij
      out[j].recv += d;  // a_{n+j} = Σ_i d_ij
    }
  }
  return out;
}

std::vector<ExpertTraffic> symmetric_traffic(const std::vector<double>& loads) {
  std::vector<ExpertTraffic> out;
  out.reserve(loads.size());
  for (const double l : loads) out.push_back(ExpertTraffic{l, l});
  return out;
}

double pair_cost(const ExpertTraffic& a, const ExpertTraffic& b) {
  return std::max(a.send + b.send, a.recv + b.recv);
}

absl::StatusOr<ColocationPlan> colocate_symmetric(const std::vector<double>& a,
                                                  const std::vector<double>& b) {
  constexpr absl::string_view kFn = "colocate_symmetric";
  if (absl::Status s = check_same_size(kFn, "a", a.size(), "b", b.size()); !s.ok()) return s;
  if (absl::Status s = check_loads(kFn, "a", a); !s.ok()) return s;
  if (absl::Status s = check_loads(kFn, "b", b); !s.ok()) return s;
  // Theorem 6.2: a ascending, b descending, pair in order.
  const std::vector<int64_t> a_order = order_by(a, /*descending=*/false);
  const std::vector<int64_t> b_order = order_by(b, /*descending=*/true);
  std::vector<int64_t> b_of_a(a.size());
  for (size_t k = 0; k < a.size(); ++k) b_of_a[idx(a_order[k])] = b_order[k];
  return plan_from_partner(symmetric_traffic(a), symmetric_traffic(b), b_of_a);
}

absl::StatusOr<ColocationPlan> colocate_bottleneck(const std::vector<ExpertTraffic>& a,
                                                   const std::vector<ExpertTraffic>& b) {
  constexpr absl::string_view kFn = "colocate_bottleneck";
  if (absl::Status s = check_same_size(kFn, "a", a.size(), "b", b.size()); !s.ok()) return s;
  if (absl::Status s = check_traffic(kFn, "a", a); !s.ok()) return s;
  if (absl::Status s = check_traffic(kFn, "b", b); !s.ok()) return s;
  // §6.2 Case II: complete bipartite graph, edge weight max(a_i + b_j, a_{n+i} + b_{n+j}).
  std::vector<std::vector<double>> cost(a.size(), std::vector<double>(b.size()));
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = 0; j < b.size(); ++j) cost[i][j] = pair_cost(a[i], b[j]);
  }
  absl::StatusOr<BottleneckMatching> matching = bottleneck_matching(cost);
  if (!matching.ok()) return matching.status();
  ColocationPlan plan = plan_from_partner(a, b, matching->col_of_row);
  MUFLOW_ASSERT(plan.max_cost == matching->bottleneck, "colocation cost differs from matching");
  return plan;
}

absl::StatusOr<ColocationPlan> colocate_bottleneck(const std::vector<double>& a,
                                                   const std::vector<double>& b) {
  constexpr absl::string_view kFn = "colocate_bottleneck";
  if (absl::Status s = check_same_size(kFn, "a", a.size(), "b", b.size()); !s.ok()) return s;
  if (absl::Status s = check_loads(kFn, "a", a); !s.ok()) return s;
  if (absl::Status s = check_loads(kFn, "b", b); !s.ok()) return s;
  return colocate_bottleneck(symmetric_traffic(a), symmetric_traffic(b));
}

absl::StatusOr<HeterogeneousColocationPlan> colocate_heterogeneous(
    const std::vector<ExpertTraffic>& a, const std::vector<ExpertTraffic>& b,
    const std::vector<double>& speeds) {
  constexpr absl::string_view kFn = "colocate_heterogeneous";
  if (absl::Status s = check_same_size(kFn, "a", a.size(), "b", b.size()); !s.ok()) return s;
  if (absl::Status s = check_same_size(kFn, "a", a.size(), "speeds", speeds.size()); !s.ok()) {
    return s;
  }
  if (absl::Status s = check_traffic(kFn, "a", a); !s.ok()) return s;
  if (absl::Status s = check_traffic(kFn, "b", b); !s.ok()) return s;
  if (absl::Status s = check_speeds(kFn, speeds); !s.ok()) return s;
  // Step 1 (§7.2): expert colocation by the §6 Case II bottleneck matching, ignoring speeds.
  absl::StatusOr<ColocationPlan> colocation = colocate_bottleneck(a, b);
  if (!colocation.ok()) return colocation.status();
  // Step 2: GPUs (rows) x pairs (columns), weight = time of the pair on that GPU.
  const size_t n = speeds.size();
  std::vector<std::vector<double>> time(n, std::vector<double>(n));
  for (size_t g = 0; g < n; ++g) {
    for (size_t p = 0; p < n; ++p) time[g][p] = colocation->gpu_cost[p] / speeds[g];
  }
  absl::StatusOr<BottleneckMatching> assignment = bottleneck_matching(time);
  if (!assignment.ok()) return assignment.status();

  HeterogeneousColocationPlan out;
  out.pair_of_gpu.resize(n);
  out.gpu_time.resize(n);
  for (size_t g = 0; g < n; ++g) {
    const size_t p = idx(assignment->col_of_row[g]);
    out.pair_of_gpu[g] = colocation->pairs[p];
    out.gpu_time[g] = time[g][p];
  }
  out.max_time = assignment->bottleneck;
  out.colocation_max_cost = colocation->max_cost;
  return out;
}

}  // namespace muflow::engine::planning
