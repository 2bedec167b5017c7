#pragma once
/// \file
/// The device scheduling policy of a run: the topology's `[scheduler] policy`, or its wiring's
/// default where the file names none.

#include <memory>

#include "absl/status/statusor.h"
#include "engine/serving/scheduling_policy.hpp"
#include "engine/topology/topology.hpp"

namespace muflow::actors {

/// The policy every device of a run of `topology` uses: `scheduler.policy` when set, else
/// `WiringTraits::default_policy` of `topology.wiring` (async and async-replicated: the
/// defragging scheduler, AsyncMoE Algorithm 1; the barrier wirings: FIFO), built with
/// `scheduler.defrag_lookahead` / `defrag_decay`. Errors: InvalidArgument naming
/// `topology.source` and the key, for an unknown wiring or policy or a K or δ out of range.
/// Pure; thread-safe.
absl::StatusOr<std::unique_ptr<engine::serving::SchedulingPolicy>> make_device_policy(
    const engine::topology::Topology& topology);

}  // namespace muflow::actors
