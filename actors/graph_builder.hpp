#pragma once
/// \file
/// Spawns the actors of a run's wiring graph (actors/wiring_graph.hpp): attention DP rank r
/// (every block) and its sampler on ctx->placement.rank_device[r], expert slot s of block b on
/// graph.slot_device[b][s], a barrier collective per block for dispatch and for combine when
/// the graph has barrier edges, and one device actor per device. Generic: which wiring built
/// the graph does not matter here (actors/wirings/).

#include <caf/all.hpp>
#include <memory>
#include <vector>

#include "actors/device.hpp"
#include "actors/process_layout.hpp"
#include "actors/run_context.hpp"
#include "engine/serving/scheduling_policy.hpp"

namespace muflow::actors {

/// Spawns every device, stage and collective actor into `ctx->actors` (all but the
/// coordinator). Call before the coordinator starts; `ctx` must already hold the model,
/// executors, topology, placement, num_ranks and the wiring (ctx->wiring). With a `layout`
/// (a run spanning processes, #18) only the devices it hosts get actors (their device actor
/// and stages), and each barrier collective a replica where it has a source or a
/// destination (`place_collective`); every other entry of the table is `layout->remote(...)`.
/// Null: everything in this process.
void build_wiring(caf::actor_system& sys, const std::shared_ptr<RunContext>& ctx,
                  std::shared_ptr<const engine::serving::SchedulingPolicy> policy,
                  ProcessLayout* layout = nullptr);

/// The handle the actors of `layout`'s process send `block`'s collective of `kind` to, in a
/// run that spans processes (#18): a replica spawned here (collective.hpp, CollectiveReplica)
/// when this process hosts one of its sources or destinations; its peers are the replicas of
/// the other processes that host destinations or are the primary, the process of DP rank 0,
/// which reports the barrier. Else a remote handle for the primary's replica. Needs
/// ctx->sites.
caf::actor place_collective(caf::actor_system& sys, const std::shared_ptr<RunContext>& ctx,
                            ProcessLayout& layout, CollectiveKind kind, int32_t block);

/// The two halves of build_wiring, for several runs sharing the devices (colocated models,
/// Aurora §6): build_stages spawns one run's stage and collective actors and appends its
/// stages to `local[device]` (local indices continue after the runs built before it);
/// spawn_devices then spawns one device actor per device over all of them (scheduler options
/// from the first run) and gives every run the same device actors.
/// `layout` as in build_wiring.
void build_stages(caf::actor_system& sys, const std::shared_ptr<RunContext>& ctx,
                  std::vector<std::vector<DeviceStage>>& local, ProcessLayout* layout = nullptr);
void spawn_devices(caf::actor_system& sys, const std::vector<std::shared_ptr<RunContext>>& ctxs,
                   std::vector<std::vector<DeviceStage>> local,
                   std::shared_ptr<const engine::serving::SchedulingPolicy> policy,
                   ProcessLayout* layout = nullptr);

}  // namespace muflow::actors
