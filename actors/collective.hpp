#pragma once
/// \file
/// The collective actor: a barrier all-to-all of one block (ARCHITECTURE.md §3). It waits for
/// one Contribution from each of `num_sources` sources for an iteration, then lets the graph's
/// CollectiveRule build each destination's batch (default: the parts in source order) and
/// delivers them (on sim after the big-switch transfers, in the topology's a2a_order).

#include <cstdint>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/run_context.hpp"

namespace muflow::actors {

/// The layer id of destination `slot` of a block's collective: expert slot (dispatch), or
/// the merge point of DP rank `slot` (combine: attention of block + 1, or the sampler).
engine::dataflow::LayerId collective_destination_layer(const RunContext& ctx, CollectiveKind kind,
                                                       int32_t block, size_t slot);

/// Spawns the collective of `block`. Destinations are looked up in ctx->actors when the
/// barrier completes: dispatch → experts[block][slot]; combine → the merge stage of each rank.
/// Dispatch collectives also report tokens per device to the coordinator (load balance).
caf::actor spawn_collective(caf::actor_system& sys, RunContextPtr ctx, CollectiveKind kind,
                            int32_t block);

}  // namespace muflow::actors
