#pragma once
/// \file
/// Aurora's expert placement planners: which GPU hosts which expert when GPUs differ in speed,
/// and which experts of two models share a GPU when two models are colocated. Pure functions:
/// no actors, no I/O, no global state; every function may be called from any thread, is
/// deterministic, and the caller owns every returned object.
///
/// Source: Aurora (Li et al., "Optimizing Mixture-of-Experts Inference Time Combining Model
/// Deployment and Communication Scheduling", Oct. 2024),
/// `../shared/seeds/002_2bb854867a0c1b0b.txt`:
///  - §5.1, Theorem 5.1 (exclusive model, heterogeneous GPUs): `assign_by_capability`;
///  - §6.2 (colocating two models, homogeneous GPUs): the per-expert traffic vectors and
///    Eq. 6, Theorem 6.2 (`colocate_symmetric`, Case I) and bottleneck matching
///    (`bottleneck_matching`, `colocate_bottleneck`, Case II);
///  - §7.2 (colocating + heterogeneous): the decoupled heuristic, `colocate_heterogeneous`.
///
/// Cost model. §6.2 reduces the first all-to-all of each model to per-GPU traffic: with `D` the
/// model's traffic matrix (`d_ij` = traffic GPU i sends to GPU j), expert i sends
/// `a_i = Σ_j d_ij` and receives `a_{n+i} = Σ_j d_ji` (`ExpertTraffic{send, recv}`). When expert
/// i of model a and expert j of model b share a GPU, that GPU sends and receives
/// `h = (a_i + b_j, a_{n+i} + b_{n+j})` (Eq. 6), and by Theorem 4.2 the aggregated all-to-all
/// takes time proportional to the largest row or column sum of the combined matrix, so the cost
/// of the pair is the edge weight of §6.2 Case II:
///     pair_cost(i, j) = max(a_i + b_j, a_{n+i} + b_{n+j})      (units of the traffic: tokens
///                                                               or bytes)
/// and the best colocation minimises max over GPUs of pair_cost (Theorem 6.1). In Case I
/// (send == recv for every expert) this is `a_i + b_j`. Footnote 4's variant with the gate
/// time `max(b_j, G^b)` is not modelled (the paper says it does not change the optimum).
/// On heterogeneous GPUs (§5, §7) the time of a GPU is its cost divided by its speed
/// (`speeds[g]`, e.g. tokens/s or a relative capability; the result's unit is cost / speed).

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace muflow::engine::planning {

// ---------------------------------------------------------------------------------------------
// Exclusive model on heterogeneous GPUs (§5.1)

/// Which GPU hosts each expert, and the resulting per-GPU time.
struct CapabilityAssignment {
  std::vector<int64_t> gpu_of_expert;  ///< `[num_experts]`, GPU index in [0, num_gpus).
  std::vector<double> gpu_time;        ///< `[num_gpus]`, Σ loads of its experts / speed.
  double max_time = 0.0;               ///< max over GPUs of `gpu_time` (0 with no GPUs).

  friend bool operator==(const CapabilityAssignment&, const CapabilityAssignment&) = default;
};

/// Theorem 5.1 (§5.1): sort experts by load descending (ties to the lower expert index) and GPUs
/// by speed descending (ties to the lower GPU index); the first `experts_per_gpu` experts go to
/// the fastest GPU, the next `experts_per_gpu` to the second fastest, and so on.
/// `loads`: `[num_experts]`, tokens each expert processes, finite and >= 0.
/// `speeds`: `[num_gpus]`, relative capability of each GPU (FLOP/s, tokens/s, bandwidth),
/// finite and > 0. The time of a GPU is Σ of its experts' loads / its speed.
/// With `experts_per_gpu == 1` this minimises the maximum GPU time over all assignments (the
/// exchange argument of Theorem 5.1's proof; tested against brute force). With more than one
/// expert per GPU it is the same rule applied block-wise, as the paper gives no rule for that
/// case, and it is NOT optimal in general (loads {5, 4, 3, 2} on two equal GPUs give {5, 4} +
/// {3, 2} = 9, while {5, 2} + {4, 3} = 7).
/// Errors: InvalidArgumentError when `experts_per_gpu < 1`, num_experts != num_gpus *
/// experts_per_gpu, a load is negative or not finite, or a speed is not finite and > 0.
/// Empty inputs (no GPUs, no experts) give an empty assignment.
absl::StatusOr<CapabilityAssignment> assign_by_capability(const std::vector<double>& loads,
                                                          const std::vector<double>& speeds,
                                                          int64_t experts_per_gpu);

// ---------------------------------------------------------------------------------------------
// Bottleneck matching (§6.2, Case II)

/// A perfect matching of an n×n bipartite graph and its bottleneck (largest edge weight).
struct BottleneckMatching {
  std::vector<int64_t> col_of_row;  ///< `[n]`, a permutation: row i is matched to column
                                    ///< `col_of_row[i]`.
  double bottleneck = 0.0;          ///< max_i weights[i][col_of_row[i]]; 0 when n == 0.

  friend bool operator==(const BottleneckMatching&, const BottleneckMatching&) = default;
};

/// Minimum-bottleneck perfect matching (§6.2 Case II, the "bottleneck matching problem"): binary
/// search over the sorted distinct weights for the smallest w such that the subgraph of edges
/// with weight <= w has a perfect matching, tested with Boost.Graph's maximum cardinality
/// matching (Edmonds; the paper names Hopcroft-Karp, any maximum matching gives the same
/// answer). O(log n) matching runs on at most n^2 edges, plus O(n^3) for the tie-break.
/// Tie-break (deterministic, independent of the matching library's choices): among all perfect
/// matchings whose edges are all <= the optimal bottleneck, the lexicographically smallest
/// `col_of_row` is returned.
/// `weights`: `[n][n]`, row i = left vertex i, column j = right vertex j; any units. ±inf are
/// allowed (e.g. +inf for a forbidden pair; the bottleneck is +inf when every perfect matching
/// uses one). n == 0 gives an empty matching with bottleneck 0.
/// Errors: InvalidArgumentError when a row's length differs from the number of rows or an entry
/// is NaN.
absl::StatusOr<BottleneckMatching> bottleneck_matching(
    const std::vector<std::vector<double>>& weights);

// ---------------------------------------------------------------------------------------------
// Colocating two models on one homogeneous cluster (§6)

/// Traffic of one expert (equivalently of the GPU it would run on alone) in a model's first
/// all-to-all (§6.2): `send` = a_i = Σ_j d_ij, `recv` = a_{n+i} = Σ_j d_ji. Units: tokens or
/// bytes, the same for every expert of both models.
struct ExpertTraffic {
  double send = 0.0;
  double recv = 0.0;

  friend bool operator==(const ExpertTraffic&, const ExpertTraffic&) = default;
};

/// Per-expert traffic of a model from its traffic matrix (§6.2): `traffic[i][j]` = traffic GPU i
/// (hosting expert i) sends to GPU j, `[n][n]`, finite and >= 0. Returns `[n]`.
/// Errors: InvalidArgumentError for a non-square matrix or a negative / non-finite entry.
absl::StatusOr<std::vector<ExpertTraffic>> expert_traffic_from_matrix(
    const std::vector<std::vector<double>>& traffic);

/// Case I traffic (send == recv == `loads[i]`) for each expert. Does not validate.
std::vector<ExpertTraffic> symmetric_traffic(const std::vector<double>& loads);

/// The cost of colocating expert `a` of model a with expert `b` of model b on one GPU:
/// max(a.send + b.send, a.recv + b.recv) (§6.2 Eq. 6 and the Case II edge weight).
double pair_cost(const ExpertTraffic& a, const ExpertTraffic& b);

/// One GPU's pair of colocated experts.
struct ExpertPair {
  int64_t a = 0;  ///< expert index in model a.
  int64_t b = 0;  ///< expert index in model b.

  friend bool operator==(const ExpertPair&, const ExpertPair&) = default;
};

/// A colocation of two n-expert models on n homogeneous GPUs.
struct ColocationPlan {
  /// `[n]`, GPU g hosts `pairs[g]`. On a homogeneous cluster GPUs are interchangeable (§3), so
  /// the pairs are listed by model a's expert: `pairs[g].a == g`, and `pairs[*].b` is a
  /// permutation of [0, n).
  std::vector<ExpertPair> pairs;
  std::vector<double> gpu_cost;  ///< `[n]`, pair_cost of `pairs[g]`, traffic units.
  double max_cost = 0.0;         ///< max of `gpu_cost`; 0 when n == 0.

  friend bool operator==(const ColocationPlan&, const ColocationPlan&) = default;
};

/// Theorem 6.2 (§6.2 Case I, every expert sends as much as it receives): sort `a` ascending and
/// `b` descending (ties to the lower index in both) and pair them in order; the pair cost is
/// a_i + b_j. Minimises the maximum pair cost over all colocations.
/// `a`, `b`: `[n]` per-expert loads of models a and b, finite and >= 0 (tokens or bytes).
/// Agreement with `colocate_bottleneck`: on Case I inputs both reach the same `max_cost` (both
/// are optimal), but when several colocations are optimal they may pick different pairs
/// (`colocate_bottleneck` takes the lexicographically smallest optimal one). Theorem 6.2 does
/// not apply to Case II (send != recv); use `colocate_bottleneck` there.
/// Errors: InvalidArgumentError when the sizes differ or a load is negative or not finite.
absl::StatusOr<ColocationPlan> colocate_symmetric(const std::vector<double>& a,
                                                  const std::vector<double>& b);

/// §6.2 Case II: the colocation minimising max pair_cost, by `bottleneck_matching` on the n×n
/// matrix `pair_cost(a[i], b[j])`. Optimal for both cases (Theorem 6.1 makes it the
/// inference-time optimum on a homogeneous cluster); ties as `bottleneck_matching`.
/// `a`, `b`: `[n]` per-expert traffic of models a and b, finite and >= 0.
/// Errors: InvalidArgumentError when the sizes differ or a value is negative or not finite.
absl::StatusOr<ColocationPlan> colocate_bottleneck(const std::vector<ExpertTraffic>& a,
                                                   const std::vector<ExpertTraffic>& b);
/// Case I convenience: `colocate_bottleneck(symmetric_traffic(a), symmetric_traffic(b))`, i.e.
/// pair cost a_i + b_j.
absl::StatusOr<ColocationPlan> colocate_bottleneck(const std::vector<double>& a,
                                                   const std::vector<double>& b);

// ---------------------------------------------------------------------------------------------
// Colocating two models on heterogeneous GPUs (§7)

/// A colocation of two n-expert models on n GPUs of different speeds.
struct HeterogeneousColocationPlan {
  std::vector<ExpertPair> pair_of_gpu;  ///< `[num_gpus]`, the experts GPU g hosts.
  std::vector<double> gpu_time;         ///< `[num_gpus]`, pair_cost / speeds[g].
  double max_time = 0.0;                ///< max of `gpu_time`; 0 when n == 0.
  /// max pair_cost of the colocation chosen in the first step (the §6 optimum, traffic units).
  double colocation_max_cost = 0.0;

  friend bool operator==(const HeterogeneousColocationPlan&,
                         const HeterogeneousColocationPlan&) = default;
};

/// §7.2 decoupled heuristic for Colocating + Heterogeneous (the joint problem is a 3-dimensional
/// matching, NP-hard, §7.1): (1) colocate the experts ignoring GPU speeds, by
/// `colocate_bottleneck(a, b)`; (2) assign the pairs to GPUs by `bottleneck_matching` with
/// weight[g][p] = pair_cost(pair p) / speeds[g]. Not optimal in general: the first step balances
/// pair costs, while a fast GPU could take a heavier pair (e.g. Case I loads a = {1, 3},
/// b = {2, 5}, speeds {2, 1}: the heuristic pairs {1+5, 3+2} and reaches 5, the joint optimum
/// pairs {3+5 on GPU 0, 1+2 on GPU 1} and reaches 4). The paper reports 1.07x the optimum
/// (§8); see tests/unit/aurora_placement_test.cpp for the gap on small random instances.
/// `a`, `b`: `[n]` per-expert traffic, finite and >= 0. `speeds`: `[n]`, finite and > 0.
/// Errors: InvalidArgumentError when the sizes differ, a traffic value is negative or not
/// finite, or a speed is not finite and > 0.
absl::StatusOr<HeterogeneousColocationPlan> colocate_heterogeneous(
    const std::vector<ExpertTraffic>& a, const std::vector<ExpertTraffic>& b,
    const std::vector<double>& speeds);

}  // namespace muflow::engine::planning
