#pragma once
/// \file
/// The collective actor: a barrier all-to-all of one block (ARCHITECTURE.md §3). It waits for
/// one Contribution from each of `num_sources` sources for an iteration, then concatenates the
/// parts addressed to each destination in source order (deterministic) and delivers them.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/run_context.hpp"

namespace muflow::actors {

/// Which all-to-all of the sync wiring a collective implements.
enum class CollectiveKind { kDispatch, kCombine };

/// Spawns the collective of `block`. Destinations are looked up in ctx->actors when the
/// barrier completes: dispatch → experts[block][e]; combine → the merge stage of each rank.
/// Dispatch collectives also report tokens per device to the coordinator (load balance).
caf::actor spawn_collective(caf::actor_system& sys, RunContextPtr ctx, CollectiveKind kind,
                            int32_t block);

}  // namespace muflow::actors
