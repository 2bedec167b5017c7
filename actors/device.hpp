#pragma once
/// \file
/// The device actor: one per device. It owns the device's scheduling policy and runs its stages
/// one at a time (a cpu device is one executor thread of real math): it grants every contested
/// start, while a stage that finds the device idle with nothing waiting starts on its own
/// (device_gate.hpp; ARCHITECTURE.md §3).

#include <caf/all.hpp>
#include <cstdint>
#include <memory>
#include <vector>

#include "actors/device_gate.hpp"
#include "actors/run_context.hpp"
#include "engine/serving/scheduling_policy.hpp"

namespace muflow::actors {

/// One stage a device multiplexes: its run (model) and its layer id.
struct DeviceStage {
  RunContextPtr ctx;
  engine::dataflow::LayerId layer;
};

/// Spawns device `device_index` with its stages in local-index order (stage i reports
/// `ready`/`done` with local index i). The stages may belong to several runs sharing the
/// device (colocated models, Aurora §6); `ctx` (the first run) supplies the clock, the trace
/// of the busy counter and the scheduler options. Stages report their busy intervals to their
/// own run's coordinator. `gate` (not null) is shared with the stages, which reach it through
/// `ActorTable::device_gates`: a stage starts without a grant when the device is idle and
/// nothing waits, and ends without `done` when nothing waits then (device_gate.hpp).
caf::actor spawn_device(caf::actor_system& sys, RunContextPtr ctx, int64_t device_index,
                        std::vector<DeviceStage> stages,
                        std::shared_ptr<const engine::serving::SchedulingPolicy> policy,
                        std::shared_ptr<DeviceGate> gate);

}  // namespace muflow::actors
