#pragma once
/// \file
/// `async` (AsyncMoE §3): attention DP ranks (every block, plus the sampler) and experts on
/// disjoint devices; no collectives and no barriers: a stage's outputs go point to point to
/// the next stage's μ-queue (on sim after the big-switch transfer); expert stages and block 0
/// re-batch whatever queued, up to `[scheduler] max_batch_tokens`; merge points release a
/// request's tokens when complete (`[scheduler] merge = "request"`) or a whole attention run
/// at a time (`"wave"`); the coordinator feeds each request its next step as soon as the
/// previous one returned and admits to the rank with the most free KV cache; device actors may
/// hold small fragments (`hold_min_tokens`, `hold_max_ms`).

#include "actors/wirings/wiring.hpp"

namespace muflow::actors {

/// The `async` wiring: one immutable static instance (any thread); the registry hands it out.
const Wiring& async_wiring();

/// The async graph of a run (for wirings built on it, e.g. async-replicated).
WiringGraph async_graph(const RunContext& ctx);

}  // namespace muflow::actors
