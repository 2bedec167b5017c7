#pragma once
/// \file
/// HarMoEny token rebalancing: pure functions that turn per-rank, per-expert token counts into
/// a dispatch schedule `S[src_rank, expert, dst_rank]` that moves tokens of overloaded ranks to
/// underloaded ones. No actors, no I/O, no global state; every function may be called from any
/// thread, and the caller owns every returned object.
///
/// Sources:
///  - `harmoeny_rebalance_paper`: HarMoEny (Doucet et al.), §4.2, Algorithm 2 "HarMoEny Token
///    Rebalancing" (`../shared/seeds/000_94a58d025960256d.txt`).
///  - `harmoeny_rebalance_code`: the variant HarMoEny's public code actually runs
///    (`../shared/seeds/NOTES.md`; the paper's Algorithm 2 is disabled there), checked
///    against sacs-epfl/HarMoEny commit 563b5a6d, `src/harmonymoe/scheduler.py`,
///    `schedule_harmony`: avg = ⌊T / G⌋; while some GPU is above avg: g_max = first argmax,
///    g_min = first argmin of the loads; stop if g_min == g_max or load[g_min] + q > avg; e =
///    first argmax over experts of Σ_src S[src, e, g_max]; stop if that sum < q; then, with
///    `overloaded = load[g_max] − avg`, while overloaded > 0 and g_min has room, the sender
///    with the most tokens of e on g_max (first argmax) moves min(its tokens, avg −
///    load[g_min]) to g_min and `overloaded` drops by that.
///  - `harmoeny_default_q`: §4.4, Eq. 4.
///
/// Guarantees shared by both variants (tested in tests/unit/harmoeny_rebalance_test.cpp):
///  - conservation: for every (src, expert), Σ_dst S[src, e, dst] equals the initial count;
///  - tokens only move from a rank whose load exceeds `avg_tokens` to a rank whose load after
///    the move is ≤ `avg_tokens`, so no rank's load ever rises above max(its initial load,
///    avg_tokens) and the maximum load never increases;
///  - termination after at most num_ranks·(num_ranks·num_experts + 1) moves (asserted);
///  - the stop reason (`RebalanceStop`) is a certificate that holds on the returned schedule.
/// Neither variant guarantees "no rank above avg + q" in general; see `RebalanceStop` for the
/// bound each stop reason does give.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace muflow::engine::planning {

/// A dispatch schedule: `tokens[(src * num_experts + e) * num_ranks + dst]` is the number of
/// tokens that rank `src` routed to expert `e` and that are computed on rank `dst`.
/// Shape `[num_ranks (src), num_experts, num_ranks (dst)]`, row-major, units: tokens.
struct RebalanceSchedule {
  int64_t num_ranks = 0;
  int64_t num_experts = 0;
  std::vector<int64_t> tokens;

  int64_t& at(int64_t src, int64_t expert, int64_t dst) {
    return tokens[static_cast<size_t>((src * num_experts + expert) * num_ranks + dst)];
  }
  int64_t at(int64_t src, int64_t expert, int64_t dst) const {
    return tokens[static_cast<size_t>((src * num_experts + expert) * num_ranks + dst)];
  }
  /// Per-destination load `[num_ranks]` in tokens: Σ_{src, e} S[src, e, dst].
  std::vector<int64_t> loads() const;

  friend bool operator==(const RebalanceSchedule&, const RebalanceSchedule&) = default;
};

/// Why a rebalancing loop stopped. Each value is a property of the returned schedule; let
/// `avg = avg_tokens`, `G = num_ranks`, `E = num_experts`, `T = total tokens`.
enum class RebalanceStop {
  /// No rank has load > avg (paper line 8 / code loop condition). Then max load ≤ avg.
  kBalanced,
  /// Nothing worth moving:
  ///  - paper (lines 13–15): with g_max = argmax load and g_from = argmax_src Σ_e S[src,:,g_max],
  ///    max_e S[g_from, e, g_max] < q. Implies max load ≤ G·E·(q − 1).
  ///  - code: max_e Σ_src S[src, e, g_max] < q. Implies max load ≤ E·(q − 1).
  kBelowThreshold,
  /// No rank can take q tokens without exceeding avg: min load + q > avg (paper line 19).
  /// Implies max load ≤ T − (G − 1)·(avg − q + 1).
  kNoReceiver,
  /// argmin load == argmax load (paper line 19). Unreachable while some rank is above avg
  /// (kept because the paper tests it); never returned in practice.
  kSameRank,
};

/// Output of a rebalancing run.
struct RebalanceResult {
  RebalanceSchedule schedule;  ///< `[num_ranks, num_experts, num_ranks]`, tokens.
  std::vector<int64_t> loads;  ///< `[num_ranks]`, tokens per destination rank after moves.
  int64_t avg_tokens = 0;      ///< ⌊T / num_ranks⌋ (paper line 5), tokens.
  int64_t num_moves = 0;       ///< Number of (src, expert, g_max → g_min) transfers made.
  int64_t tokens_moved = 0;    ///< Σ of the transferred token counts.
  RebalanceStop stop = RebalanceStop::kBalanced;
};

/// The naive schedule (Algorithm 1, step 3, `S_initial`): every token goes to its expert's home.
/// `counts`: `[num_ranks][num_experts]`, tokens rank `src` routed to expert `e`, each ≥ 0.
/// `expert_home`: `[num_experts]`, the rank hosting each expert, each in [0, num_ranks).
/// Errors: InvalidArgumentError when num_ranks or num_experts is 0, rows are ragged,
/// `expert_home` has the wrong length or an out-of-range rank, a count is negative, or the
/// total token count overflows int64.
absl::StatusOr<RebalanceSchedule> harmoeny_initial_schedule(
    const std::vector<std::vector<int64_t>>& counts, const std::vector<int64_t>& expert_home);

/// HarMoEny Algorithm 2 (paper §4.2), followed line by line; ties break to the lowest index.
/// `initial`: any valid schedule (non-negative entries, consistent shape), e.g. from
/// `harmoeny_initial_schedule`. `q`: token transfer threshold in tokens, ≥ 1 (with q ≤ 0 the
/// paper's loop can move 0 tokens forever, so it is rejected).
/// Errors: InvalidArgumentError for a malformed schedule or q < 1.
absl::StatusOr<RebalanceResult> harmoeny_rebalance_paper(const RebalanceSchedule& initial,
                                                         int64_t q);
/// Convenience: `harmoeny_rebalance_paper(harmoeny_initial_schedule(counts, expert_home), q)`.
absl::StatusOr<RebalanceResult> harmoeny_rebalance_paper(
    const std::vector<std::vector<int64_t>>& counts, const std::vector<int64_t>& expert_home,
    int64_t q);

/// The variant of HarMoEny's public code (NOTES.md): while some rank is above avg, take
/// g_max = argmax load and g_min = argmin load; stop if g_min == g_max or load[g_min] + q > avg;
/// pick the expert e with the most tokens on g_max (Σ over sources); stop if that is < q;
/// move e's tokens from its largest senders (by S[src, e, g_max], descending, ties to the lowest
/// src) to g_min, each move min(sender's tokens, avg − load[g_min]), while g_max is still above
/// avg (`overloaded = load[g_max] − avg`, less what was moved, > 0; the last move may take it
/// below), g_min is below avg and e has tokens left on g_max. avg = ⌊T / num_ranks⌋ as in the
/// paper and in HarMoEny @ 563b5a6d `schedule_harmony` (the file header).
/// Arguments and errors as `harmoeny_rebalance_paper`.
absl::StatusOr<RebalanceResult> harmoeny_rebalance_code(const RebalanceSchedule& initial,
                                                        int64_t q);
/// Convenience: `harmoeny_rebalance_code(harmoeny_initial_schedule(counts, expert_home), q)`.
absl::StatusOr<RebalanceResult> harmoeny_rebalance_code(
    const std::vector<std::vector<int64_t>>& counts, const std::vector<int64_t>& expert_home,
    int64_t q);

/// Default token threshold from Eq. 4 (§4.4): q > φ·d_type / (2β), the token count at which
/// computing an expert (≈ 4·q·m·p FLOPs for an m×p and a p×m matrix) takes longer than copying
/// its weights (2·m·p·d_type bytes) over the host link. Returns the smallest integer strictly
/// greater than the bound, and at least 1.
/// `flops_per_s`: φ, the device's FLOP/s. `host_bytes_per_s`: β, host-to-device bandwidth in
/// bytes/s. `dtype_bytes`: d_type, bytes per weight element (4 for fp32, 2 for bf16).
/// Result in tokens. Errors: InvalidArgumentError when an argument is not finite and > 0, or
/// the result does not fit in int64.
absl::StatusOr<int64_t> harmoeny_default_q(double flops_per_s, double host_bytes_per_s,
                                           double dtype_bytes);

}  // namespace muflow::engine::planning
