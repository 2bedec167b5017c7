#pragma once
/// \file
/// Asking a run's stages what they hold now (KV-cache bytes, μ-queue depths): what a
/// long-lived engine reports in ServingEngine::stats and kv_cache_bytes, and what a worker
/// process answers for the stages it hosts (actors/cluster/worker.cpp, `cl_stats`).

#include <caf/all.hpp>
#include <chrono>
#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "actors/process_layout.hpp"
#include "actors/run_context.hpp"

namespace muflow::actors {

/// Asks every stage of `ctx` on a device for which `hosted(device)` is true (every stage when
/// `hosted` is empty; the others are another process's) for its KV-cache bytes (attention
/// stages) and the tokens in its μ-queue, one request–response each, from a hidden scoped
/// actor of `sys`. Errors: Internal naming the stage kind when a stage does not answer within
/// `timeout` or has stopped. Blocks the calling thread: a host thread, or an actor that may
/// block (the worker's gate). The stages are read, not changed.
absl::StatusOr<StageLoad> probe_stages(caf::actor_system& sys, const RunContext& ctx,
                                       const std::function<bool(int64_t device)>& hosted,
                                       std::chrono::milliseconds timeout);

}  // namespace muflow::actors
