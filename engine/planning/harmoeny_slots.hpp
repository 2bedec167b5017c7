#pragma once
/// \file
/// HarMoEny's expert slot cache (§4.3): the run order of one device's experts in one MoE
/// layer and the timeline of the asynchronous weight copies that bring foreign experts into
/// its slots. Pure: no actors, no clocks; any thread.
///
/// Run order (HarMoEny's public code, ../shared/seeds/NOTES.md): local experts by descending
/// token count (ties to the lower id); the (up to) two largest run first; then the foreign
/// experts (descending token count), each into a free slot; then the remaining local experts.
/// Slots: the device has `num_slots` slots holding its home experts (a home expert with no
/// tokens here leaves its slot free from the start, as does any slot beyond the home experts);
/// a leader's slot frees when it finishes, a foreign expert's slot when it finishes. Each
/// foreign expert is copied from host memory into the earliest free slot, overwriting it in
/// place (no write-back); at the end every overwritten slot's home expert is copied back
/// (counted, but off this layer's critical path: the copy stream is idle until the next use of
/// the layer).
///  - prefetch (HarMoEny): a copy starts as soon as its slot and the copy stream are free,
///    overlapping the experts computing before it;
///  - no prefetch (the ablation "rebalance without prefetch"): a foreign expert's copy starts
///    only when the compute stream reaches it, then it computes.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace muflow::engine::planning {

/// One expert that has tokens on this device in this layer.
struct SlotWork {
  int32_t expert = 0;
  int64_t tokens = 0;
  bool local = true;         ///< hosted here (in a slot already) or foreign (must be copied)
  double compute_s = 0;      ///< seconds to compute its tokens
};

/// Where each expert ran and how long the layer took on this device.
struct SlotTimeline {
  std::vector<int32_t> order;      ///< experts in run order
  std::vector<double> start_s;     ///< [order.size()] compute start, seconds from layer start
  std::vector<double> end_s;       ///< [order.size()] compute end
  /// [order.size()] the slot a foreign expert is copied into (ids in [0, num_slots): spare
  /// slots first, then home slots); -1 for a local expert (its weights are already here).
  std::vector<int32_t> slot;
  /// [order.size()] for a foreign expert, the position in `order` of the expert that used its
  /// slot before (whose compute must end before the copy may overwrite it); -1 when the slot
  /// was free from the layer's start, and for local experts.
  std::vector<int32_t> slot_prev;
  double makespan_s = 0;           ///< compute end of the last expert (0 when none)
  double stall_s = 0;              ///< compute-stream seconds spent waiting for copies
  int64_t fetches = 0;             ///< foreign experts copied in (expert swaps)
  int64_t restores = 0;            ///< home experts copied back afterwards
};

/// Plans one device's layer. `work`: experts with tokens here (any order; tokens ≥ 1 each,
/// distinct ids). `num_home`: home experts of this device (including ones with no tokens
/// here). `num_slots` ≥ num_home. `copy_s`: seconds to copy one expert's weights from host
/// memory (≥ 0). Errors: InvalidArgument on num_slots < num_home, num_slots < 1 while a
/// foreign expert must be fetched, more local entries than num_home, negative times or
/// tokens, or a repeated expert id.
absl::StatusOr<SlotTimeline> plan_slot_timeline(std::vector<SlotWork> work, int64_t num_home,
                                                int64_t num_slots, double copy_s,
                                                bool prefetch);

}  // namespace muflow::engine::planning
