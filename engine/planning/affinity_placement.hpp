#pragma once
/// \file
/// ExFlow expert-affinity placement: pure functions that count how tokens move between the
/// experts of consecutive MoE blocks and choose, for every block separately, which device hosts
/// which expert so that as few tokens as possible change device from one block to the next.
/// No actors, no I/O, no global state except GLPK (see `plan_affinity_placement`); the caller
/// owns every returned object.
///
/// Sources:
///  - ExFlow (Yao et al., "Exploiting Inter-Layer Expert Affinity for Accelerating
///    Mixture-of-Experts Model Inference"), §IV-B (affinity as token transitions between
///    consecutive layers), §IV-C (staged affinity: nodes first, then GPUs), §IV-D (the integer
///    program, formulas 8–12) (`../shared/seeds/003_6aaa84ebc2643a44.txt`).
///  - `../shared/seeds/NOTES.md`, "ExFlow": the public solver's variables and constraints and its
///    nodes-then-GPUs recursion.
///
/// Vocabulary: L = number of MoE blocks ("layers"), E = experts per block, N = nodes,
/// g = GPUs per node, G = N·g devices. Device d lives on node d / g (global device indices, node
/// major). A "hop" is one token moving between a block's expert and the next block's expert on a
/// different device (or node).

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/routing/routing_record.hpp"

namespace muflow::engine::planning {

/// Token transition counts between consecutive blocks.
/// `weights[(s * E + i) * E + j]` = w[s][i][j], the number of token transitions from expert i of
/// block s to expert j of block s + 1, for s in [0, L − 1). Shape `[L − 1, E, E]`, row-major,
/// units: tokens (token transitions). Empty when L == 1.
struct AffinityCounts {
  int64_t num_layers = 0;   ///< L ≥ 1
  int64_t num_experts = 0;  ///< E ≥ 1
  std::vector<int64_t> weights;

  int64_t& at(int64_t s, int64_t i, int64_t j) {
    return weights[static_cast<size_t>((s * num_experts + i) * num_experts + j)];
  }
  int64_t at(int64_t s, int64_t i, int64_t j) const {
    return weights[static_cast<size_t>((s * num_experts + i) * num_experts + j)];
  }
  /// Σ of all weights, tokens.
  int64_t total() const;

  friend bool operator==(const AffinityCounts&, const AffinityCounts&) = default;
};

/// Counts from a recorded routing table (engine/routing/routing_record.hpp). Rule: for every token
/// (request_id, position) and every pair of blocks s, s + 1 that are both present in the table
/// for that token, add 1 to w[s][top1(s)][j] for every expert j in the top-k at s + 1, where
/// top1(s) is the first entry of the token's top-k list at s. Rationale: in a context-coherent
/// wiring (ExFlow §IV-A) a token continues from the device of its top-1 expert and is then sent
/// to every device that hosts one of its next top-k experts, so w counts exactly the transfers a
/// placement may save; for top-1 models this is ExFlow's path count. Blocks a token lacks just
/// contribute nothing (no pair across a gap).
/// Errors: InvalidArgument when num_layers or num_experts < 1 (or > 2^20), a row's block is
/// outside [0, num_layers), a top-k list is empty, names an expert outside [0, num_experts) or
/// names one expert twice (the row is named in the message).
absl::StatusOr<AffinityCounts> affinity_counts_from_routing(const routing::RoutingTable& table,
                                                            int64_t num_layers,
                                                            int64_t num_experts);

/// Counts from top-1 paths, e.g. a `[num_tokens, num_layers]` trace: `paths[t][s]` is the expert
/// token t chose in block s. Adds 1 to w[s][paths[t][s]][paths[t][s + 1]] for every t and s.
/// Errors: InvalidArgument when num_layers or num_experts < 1 (or > 2^20), a path's length is
/// not num_layers, or an expert id is outside [0, num_experts) (token and block named).
absl::StatusOr<AffinityCounts> affinity_counts_from_paths(
    const std::vector<std::vector<int32_t>>& paths, int64_t num_layers, int64_t num_experts);

/// A per-block expert placement: `expert_device[s][e]` is the global device hosting expert e of
/// block s, shape `[L][E]`, values in [0, num_devices). Row s is what `Placement::expert_device`
/// (engine/planning/placement.hpp, one map for every block) would hold for block s alone. A valid
/// placement is balanced: num_devices divides E and every device hosts exactly E / num_devices
/// experts of every block.
struct AffinityPlacement {
  int64_t num_devices = 0;
  std::vector<std::vector<int64_t>> expert_device;

  friend bool operator==(const AffinityPlacement&, const AffinityPlacement&) = default;
};

/// The baseline: expert e of every block on device e % num_devices.
/// Errors: InvalidArgument when a count is < 1 or > 2^20, or num_devices does not divide
/// num_experts.
absl::StatusOr<AffinityPlacement> round_robin_placement(int64_t num_layers, int64_t num_experts,
                                                        int64_t num_devices);

/// A hop count and the total it is a part of, both in tokens.
struct HopCount {
  int64_t hops = 0;   ///< Σ w over transitions that change device (or node)
  int64_t total = 0;  ///< Σ w over all transitions
  /// hops / total; 0 when total is 0.
  double fraction() const;
  friend bool operator==(const HopCount&, const HopCount&) = default;
};

/// The objective (ExFlow formula 8 with identical transitions aggregated):
/// Σ_s Σ_{i,j} w[s][i][j] · [dev(s, i) ≠ dev(s + 1, j)], and Σ w.
/// Errors: InvalidArgument when `counts` is malformed (shape, negative entry, total above 2^53
/// tokens) or `placement` is not a valid balanced placement of counts' L × E (shape, device out
/// of range, num_devices not dividing E, a device holding the wrong number of experts of a
/// block).
absl::StatusOr<HopCount> cross_device_hops(const AffinityCounts& counts,
                                           const AffinityPlacement& placement);

/// As `cross_device_hops`, counting only transitions between different nodes, node = device /
/// gpus_per_node. Errors: as `cross_device_hops`, and InvalidArgument when gpus_per_node < 1 or
/// does not divide placement.num_devices.
absl::StatusOr<HopCount> cross_node_hops(const AffinityCounts& counts,
                                         const AffinityPlacement& placement, int64_t gpus_per_node);

/// Which solver(s) `plan_affinity_placement` runs.
enum class AffinityMethod { kMilp, kHeuristic, kBoth };

/// Options of `plan_affinity_placement`.
struct AffinityOptions {
  AffinityMethod method = AffinityMethod::kBoth;
  /// Wall-clock budget in seconds for the whole MILP solve (warm-start heuristic, model
  /// building and every GLPK sub-problem together), ≥ 0. Split across the sub-problems: stage 1
  /// gets half when a stage 2 follows, each node's stage 2 an equal share of what is left
  /// (unused time carries over). GLPK checks its limit between steps, so a solve can overrun by
  /// the time of one LP step.
  double time_limit_s = 60.0;
  /// Seed of the heuristic's random restarts (restart 0 is always deterministic round robin).
  uint64_t seed = 0;
  /// Heuristic restarts per sub-problem, ≥ 1; the best is kept.
  int64_t num_restarts = 4;
  /// Perturbations per restart (iterated local search), ≥ 0.
  int64_t num_perturbations = 200;
  /// Bound on one swap descent, in passes over all blocks (a pass tries every pair of experts of
  /// every block once), ≥ 0; 0 turns the swap search (and the perturbations) off.
  int64_t max_swap_passes = 100;
  /// A sub-problem whose MILP would have more constraint-matrix nonzeros than this is not handed
  /// to GLPK (memory); the heuristic's answer is kept for it and `optimal` is false. ≥ 1.
  int64_t max_milp_nonzeros = 4'000'000;
};

/// One solver's answer.
struct AffinitySolution {
  AffinityPlacement placement;  ///< `[L][E]`, devices node-major (device = node·g + gpu)
  HopCount cross_device;        ///< tokens changing device between consecutive blocks
  HopCount cross_node;          ///< tokens changing node between consecutive blocks
  /// MILP only: every sub-problem (stage 1, and stage 2 of every node) was solved to proven
  /// optimality. This is the staged optimum of ExFlow §IV-C/D (fewest cross-node hops, then
  /// fewest cross-GPU hops inside each node for that node partition), which with N > 1 and
  /// g > 1 need not be the fewest cross-device hops overall. False for the heuristic and round
  /// robin, and when the heuristic's placement was better and is returned instead.
  bool optimal = false;
  /// MILP only: the largest relative gap (objective − bound) / objective over the sub-problems
  /// GLPK ran (0 when proven optimal or the objective is 0); NaN when no bound is known (GLPK
  /// not run for some sub-problem, or never solved its root LP; always for the heuristic and
  /// round robin).
  double relative_gap = 0.0;
  /// Seconds of wall time this solver took (for the MILP including its warm-start heuristic).
  double wall_s = 0.0;
};

/// Result of `plan_affinity_placement`: the solvers that ran, and the baseline.
struct AffinityPlan {
  std::optional<AffinitySolution> milp;       ///< set for kMilp and kBoth
  std::optional<AffinitySolution> heuristic;  ///< set for kHeuristic and kBoth
  AffinitySolution round_robin;               ///< `round_robin_placement`, for reference
};

/// ExFlow expert placement (§IV-C/D, NOTES.md) for N = num_nodes nodes of g = gpus_per_node GPUs.
/// Two stages, as the paper: stage 1 partitions every block's experts into the N nodes
/// (minimising cross-node hops); stage 2 partitions each node's experts into its g GPUs,
/// minimising the hops between that node's GPUs (hops between nodes are fixed by stage 1).
///
/// MILP of one sub-problem (C parts, blocks s, experts i of the sub-problem, capacity E_s / C):
///   binary x[s,i,c]; Σ_c x[s,i,c] = 1; Σ_i x[s,i,c] = E_s / C for every s and c;
///   for every (s,i,j) with w[s][i][j] > 0 a continuous y[s,i,j] ∈ [0,1] with
///   y[s,i,j] ≥ x[s,i,c] − x[s+1,j,c] for every c; minimise Σ w[s][i][j]·y[s,i,j].
/// ExFlow has one binary cost variable per profiled token and boundary; tokens with the same
/// (s, i, j) have identical constraints, so replacing them by one y weighted by their count gives
/// the same optimum (and y is integral at any optimum with integral x). Symmetry breaking: parts
/// are interchangeable, so block 0's expert i may only use parts ≤ i (parts numbered by their
/// smallest block-0 expert). GLPK (branch and bound, presolve off) is warm-started with the
/// heuristic's placement through the GLP_IHEUR callback, and its answer is replaced by the
/// heuristic's when that is better by (cross-node hops, then cross-device hops), so the MILP is
/// never worse than the heuristic.
///
/// Heuristic of one sub-problem (iterated local search): per restart, an end block (block 0 on
/// even restarts, block L − 1 on odd ones) is round robin (restarts 0, 1) or random balanced
/// (seeded); block by block away from it, experts take the part holding most of their weight to
/// the block placed before, largest affinity first, respecting capacity; then pairwise swaps of
/// two experts of one block in different parts while the objective drops (first improvement,
/// at most `max_swap_passes` passes); then `num_perturbations` times: swap three random pairs of
/// a random block, descend again, keep the result if no worse. The best over restarts wins.
///
/// Arguments: `counts` as `AffinityCounts`; num_nodes, gpus_per_node ≥ 1 with N·g dividing E.
/// Errors: InvalidArgument for malformed counts (shape, negative entry, total above 2^53),
/// N or g < 1, N·g not dividing E, or options out of range. GLPK trouble (root LP not solved in
/// time, no integer solution) is not an error: the heuristic's placement is returned with
/// `optimal` false.
/// Thread safety: may be called from any thread; GLPK solves are serialised by a process-wide
/// mutex (GLPK's environment is not shared safely on every build), so concurrent MILP calls
/// wait for each other. GLPK's terminal output is switched off during the solve and restored.
/// Deterministic for fixed inputs, options and seed (except `wall_s` and, when a time limit
/// cuts a solve short, the MILP's answer).
absl::StatusOr<AffinityPlan> plan_affinity_placement(const AffinityCounts& counts,
                                                     int64_t num_nodes, int64_t gpus_per_node,
                                                     const AffinityOptions& options = {});

}  // namespace muflow::engine::planning
