#pragma once
/// \file
/// The sync wiring (DeepSpeed-MoE-style synchronous expert parallelism): attention data
/// parallel over every device (rank r on device r), experts placed by ctx->placement, and a
/// barrier all-to-all for dispatch and for combine in every MoE block.

#include <memory>

#include <caf/all.hpp>

#include "absl/status/status.h"
#include "actors/run_context.hpp"
#include "engine/scheduling_policy.hpp"

namespace muflow::actors {

/// Spawns every device, stage and collective actor of the sync wiring into `ctx->actors`
/// (all but the coordinator). Call before the coordinator starts; `ctx` must already hold the
/// model, topology and placement, and `ctx->num_ranks` is set here to the number of devices.
void build_sync_wiring(caf::actor_system& sys, const std::shared_ptr<RunContext>& ctx,
                       std::shared_ptr<const engine::SchedulingPolicy> policy);

}  // namespace muflow::actors
