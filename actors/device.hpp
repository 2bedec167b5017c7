#pragma once
/// \file
/// The device actor: one per device. It owns the device's scheduling policy and grants its
/// stages one at a time (a cpu device is one executor thread of real math), keeping busy/idle
/// accounting (ARCHITECTURE.md §3).

#include <cstdint>
#include <memory>
#include <vector>

#include <caf/all.hpp>

#include "actors/run_context.hpp"
#include "engine/scheduling_policy.hpp"

namespace muflow::actors {

/// Spawns device `device_index` with the layer ids of its stages, in local-index order
/// (stage i reports `ready`/`done` with local index i). Stages report their busy intervals to
/// the coordinator themselves.
caf::actor spawn_device(caf::actor_system& sys, RunContextPtr ctx, int64_t device_index,
                        std::vector<engine::LayerId> stages,
                        std::shared_ptr<const engine::SchedulingPolicy> policy);

}  // namespace muflow::actors
