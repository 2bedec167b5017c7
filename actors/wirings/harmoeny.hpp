#pragma once
/// \file
/// `harmoeny` (HarMoEny §4): sync's attention DP ranks and barriers, but one expert stage per
/// device per block. When a block's dispatch barrier completes it has every rank's per-expert
/// counts (the metadata all-gather) and derives the schedule S[src, expert, dst] with
/// Algorithm 2 (`[harmoeny] rebalance = "paper"`) or the public code's variant (`"code"`),
/// threshold q (Eq. 4); each source's rows are split in order. A device stage computes its
/// experts' segments: local experts, and foreign ones fetched into its expert slot cache
/// (the two largest first, copies into freed slots with or without prefetch): on sim the slot
/// cache's modeled timeline (engine/planning/harmoeny_slots.hpp), on cpu real copies by the
/// device's copy worker (engine/exec/cpu_expert_slots.hpp). Outputs return to each token's rank
/// through the ordinary combine, so tokens are bitwise those of sync.

#include "actors/wirings/wiring.hpp"

namespace muflow::actors {

/// The `harmoeny` wiring: one immutable static instance (any thread); the registry hands it out.
const Wiring& harmoeny_wiring();

}  // namespace muflow::actors
