#pragma once
/// \file
/// The collective actor: a barrier all-to-all of one block (ARCHITECTURE.md §3). It waits for
/// one Contribution from each of `num_sources` sources for an iteration, then lets the graph's
/// CollectiveRule build each destination's batch (default: the parts in source order) and
/// delivers them (on sim after the big-switch transfers, in the topology's a2a_order). A run
/// that spans processes replicates it in the processes of its sources and destinations
/// (`CollectiveReplica`).

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

/// [num sources] the device of each source of `block`'s collective of `kind` (attention
/// ranks for dispatch, expert slots for combine), in source order. Reads ctx.sites.
std::vector<int64_t> collective_source_devices(const RunContext& ctx, CollectiveKind kind,
                                               int32_t block);
/// [num destinations] the device of each destination slot of that collective.
std::vector<int64_t> collective_dest_devices(const RunContext& ctx, CollectiveKind kind,
                                             int32_t block);

/// Contributions of several sources of one process to one iteration of a collective, sent
/// together to its replica in another process (one data-plane message instead of one per
/// source; the barrier waits for the last of them either way). Shared, never modified.
struct ContributionBundle {
  std::vector<ContributionPtr> contributions;
};
using ContributionBundlePtr = std::shared_ptr<const ContributionBundle>;

/// One replica of a barrier collective in a run that spans processes (#18). Each process
/// that hosts a source or a destination of the collective runs one: the contributions of the
/// sources of this process go to the `peers` (the replicas of the other processes that host
/// destinations or are the primary), together once all of them came (a ContributionBundle),
/// and every replica that `gathers` waits for all of them, builds every destination's batch
/// with the graph's rule (rules are pure functions of the contributions, so every replica
/// builds the same batches) and delivers those of its own destinations. A barrier therefore
/// costs one process hop (source → the destination's process), not two through a central
/// collective. Only the `primary` replica (DP rank 0's process, for every barrier:
/// graph_builder.hpp, place_collective) reports the barrier's metrics to the coordinator and
/// records its trace events: rows are counted once, a layer's start and end are taken on one
/// clock, and the reports reach the driver before that process's sampled rows of the
/// iteration (the Outbox sends waiting reports first).
struct CollectiveReplica {
  /// Handles of the replicas in the other processes that host destinations or the primary.
  std::vector<caf::actor> peers;
  /// [num_devices] nonzero for the devices of this process; empty: every device (one process).
  std::vector<char> local_device;
  /// Waits for every source and delivers this process's destinations (false in a process that
  /// hosts only sources: it forwards their contributions and keeps nothing).
  bool gathers = true;
  /// Reports the barrier's metrics (rows, load, layer end) and trace events.
  bool primary = true;
};

/// Spawns the collective of `block` (in one process: the default replica, which gathers,
/// delivers every destination and reports). Destinations are looked up in ctx->actors when
/// the barrier completes: dispatch → experts[block][slot]; combine → the merge stage of each
/// rank. Dispatch collectives also report tokens per device to the coordinator (load balance).
caf::actor spawn_collective(caf::actor_system& sys, RunContextPtr ctx, CollectiveKind kind,
                            int32_t block, CollectiveReplica replica = {});

}  // namespace muflow::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(muflow::actors::ContributionBundlePtr)
