#pragma once
/// \file
/// Which actors a wiring has and where they live. Both wirings place attention DP rank r
/// (every block) and its sampler on ctx->placement.rank_device[r] and expert e (every block)
/// on ctx->placement.expert_device[e]:
///  - `sync` (DeepSpeed-MoE-style synchronous EP): every device is a DP rank, and a barrier
///    all-to-all actor per block for dispatch and for combine;
///  - `async` (AsyncMoE §3): attention and experts on disjoint devices, no collectives and no
///    barriers; stages send point to point and re-batch from their μ-queues
///    (ctx->point_to_point);
///  - `harmoeny` (HarMoEny §4): sync's barriers, but one expert stage per device per block;
///    the dispatch collective rebalances tokens (Algorithm 2) so a device may run experts it
///    fetches into its slot cache;
///  - `moeshard` (MoEShard §3): one expert stage per device per block running its shard of
///    every expert on all tokens (all-gather dispatch, reduce-scatter combine);
///  - `exflow` (ExFlow §IV-A): sync's actors with context coherence (ctx->context_coherent).
/// Sync, async and exflow have one expert stage per expert (placement.device_of(block, e)).

#include <memory>
#include <vector>

#include <caf/all.hpp>

#include "absl/status/status.h"
#include "actors/device.hpp"
#include "actors/run_context.hpp"
#include "engine/scheduling_policy.hpp"

namespace muflow::actors {

/// Spawns every device, stage and (sync) collective actor into `ctx->actors` (all but the
/// coordinator). Call before the coordinator starts; `ctx` must already hold the model,
/// executors, topology and placement (and, for `harmoeny`, ctx->harmoeny); num_ranks,
/// point_to_point, expert_mode and expert_slot_device are set here.
void build_wiring(caf::actor_system& sys, const std::shared_ptr<RunContext>& ctx,
                  std::shared_ptr<const engine::SchedulingPolicy> policy);

/// The two halves of build_wiring, for several runs sharing the devices (colocated models,
/// Aurora §6): build_stages spawns one run's stage and collective actors and appends its
/// stages to `local[device]` (local indices continue after the runs built before it);
/// spawn_devices then spawns one device actor per device over all of them (scheduler options
/// from the first run) and gives every run the same device actors.
void build_stages(caf::actor_system& sys, const std::shared_ptr<RunContext>& ctx,
                  std::vector<std::vector<DeviceStage>>& local);
void spawn_devices(caf::actor_system& sys, const std::vector<std::shared_ptr<RunContext>>& ctxs,
                   std::vector<std::vector<DeviceStage>> local,
                   std::shared_ptr<const engine::SchedulingPolicy> policy);

}  // namespace muflow::actors
