#pragma once
/// \file
/// Dispatch all-to-all for wirings whose expert stages are per device rather than per expert
/// (HarMoEny, MoEShard): pure functions that turn what every DP rank routed to every expert
/// into one segmented batch per device. No actors, no I/O; any thread; the caller owns the
/// results (activation rows are copied, input batches are not modified).
///
/// Row order is fixed (ARCHITECTURE.md invariant 1: the wiring changes speed, never the
/// answer): a destination's batch holds its experts in ascending order, each expert's rows
/// from sources in ascending rank order, each source's rows in the order it sent them.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/planning/harmoeny_rebalance.hpp"
#include "engine/dataflow/token_batch.hpp"

namespace muflow::engine::dataflow {

/// What the DP ranks sent to one block's dispatch: `parts[src][e]` holds the rows rank `src`
/// routed to expert `e` (null or empty = none). Shape [num_ranks][num_experts].
using DispatchParts = std::vector<std::vector<TokenBatchPtr>>;

/// Per-rank, per-expert token counts `[num_ranks][num_experts]` (HarMoEny's metadata
/// all-gather, Algorithm 1 step 2). Errors: InvalidArgument on ragged rows.
absl::StatusOr<std::vector<std::vector<int64_t>>> dispatch_counts(const DispatchParts& parts);

/// One batch per destination following a schedule `S[src, e, dst]` (HarMoEny Algorithm 1
/// step 4): of the rows rank `src` sent to expert `e`, the first S[src, e, 0] go to
/// destination 0, the next S[src, e, 1] to destination 1, and so on. Each result has
/// `segments` (one per expert with rows), `layer = {kExpert, block, dst}`, payload
/// kExpertInputs, `iteration`, and activation width `width` (0 = metadata only).
/// `rows_from[dst][src]` (may be null) receives how many rows each source sends each
/// destination (for the network model).
/// Errors: InvalidArgument when the schedule's shape differs from `parts` or its counts do
/// not sum to each part's row count (a token would be dropped or invented), or a part's
/// activations do not have `width` columns.
absl::StatusOr<std::vector<TokenBatchPtr>> dispatch_by_schedule(
    const DispatchParts& parts, const planning::RebalanceSchedule& schedule, int32_t block,
    int64_t iteration, int64_t width, std::vector<std::vector<int64_t>>* rows_from);

/// MoEShard's token all-gather (§3.2): every one of `num_destinations` devices receives
/// every row, grouped by expert as above (each device then runs its shard of every expert).
/// Errors: InvalidArgument when num_destinations < 1 or a part's width differs from `width`.
absl::StatusOr<std::vector<TokenBatchPtr>> dispatch_all_gather(
    const DispatchParts& parts, int64_t num_destinations, int32_t block, int64_t iteration,
    int64_t width, std::vector<std::vector<int64_t>>* rows_from);

/// MoEShard's reduce-scatter (sum) of partial expert outputs for one destination: `partials`
/// (one per shard, in shard order; nulls skipped) must carry the same tokens in the same
/// order; the result's rows are the float sums taken in shard order
/// (((p0 + p1) + p2) + …), so it is deterministic but differs from the unsharded expert's
/// output by float rounding. Metadata from the first non-null part; `layer`, `payload` and
/// `iteration` too. Returns null when every part is null.
/// Errors: InvalidArgument when parts disagree on tokens (request, position, top-k rank) or
/// widths.
absl::StatusOr<TokenBatchPtr> reduce_partials(const std::vector<TokenBatchPtr>& partials);

}  // namespace muflow::engine::dataflow
