#pragma once
/// \file
/// A long-lived engine: the actors of one Server's wiring are spawned once and serve requests
/// submitted while they run (continuous batching), until shutdown. What a serving front end
/// (HTTP, a host application) drives; Server::run is the batch client of the same coordinator
/// protocol (actors/coordinator.hpp).

#include <caf/all.hpp>
#include <cstdint>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "actors/coordinator.hpp"
#include "actors/run_context.hpp"
#include "actors/server.hpp"
#include "engine/serving/request.hpp"

namespace muflow::actors {

/// The actors of one Server, spawned once and fed requests as they come.
///
/// Thread safety: submit, cancel, drain and kv_cache_bytes may be called from any host
/// thread, concurrently. Callbacks run on the coordinator actor's thread, one at a time, and
/// must not block for long nor call back into this engine synchronously (drain would wait on
/// the thread that must answer it). Destroying the engine shuts it down.
class ServingEngine {
 public:
  /// Spawns `server`'s actors on CAF's threaded scheduler (one worker per device, at most the
  /// cores). `server` must outlive the engine. `callbacks` apply to every request (streaming
  /// and progress). Errors: FailedPrecondition on the sim backend (virtual time needs every
  /// request up front: use Server::run); the run context's errors.
  static absl::StatusOr<std::unique_ptr<ServingEngine>> start(const Server& server,
                                                              RunCallbacks callbacks = {});
  ~ServingEngine();
  ServingEngine(const ServingEngine&) = delete;
  ServingEngine& operator=(const ServingEngine&) = delete;

  /// Submits `request` now: its id is assigned here (ids count up from 0 in submission
  /// order; the given id is ignored) and its arrival time is now. Returns the id. Errors:
  /// InvalidArgument for a request Server::run would refuse (empty prompt, token outside the
  /// vocabulary, max_new_tokens < 1, prompt too long); FailedPrecondition after shutdown.
  absl::StatusOr<int64_t> submit(engine::serving::Request request, RequestCallbacks callbacks = {});

  /// Cancels request `id`: it streams no more tokens, its on_finish reports `cancelled`, and
  /// its KV cache is freed as soon as no step of it is in flight. Unknown or finished ids are
  /// ignored.
  void cancel(int64_t id);

  /// Blocks until every submitted request finished (or was cancelled), then returns the
  /// outputs, in id order, of the requests neither drained before nor handed to their own
  /// on_finish (the engine forgets a request once its output was delivered, so its memory
  /// does not grow with the requests served) and the metrics since start.
  /// Errors: the run's first error (a stage or a callback failed); FailedPrecondition after
  /// shutdown.
  absl::StatusOr<RunOutcome> drain();

  /// KV-cache bytes held by all attention stages now (asks each stage). Errors:
  /// FailedPrecondition after shutdown; Internal when a stage does not answer.
  absl::StatusOr<int64_t> kv_cache_bytes();

  /// The engine's state now: waiting / running / finished requests, metrics since start
  /// (per-device busy %, MoE balance, TTFT/ITL), expert tokens per block and device, and the
  /// tokens queued in every stage's μ-queue summed per stage kind. Asks the coordinator and
  /// every stage (one round trip each; cost grows with the requests served so far, since the
  /// metrics are summarized from the recorded events). Errors: FailedPrecondition after
  /// shutdown; Internal when an actor does not answer within 10 s.
  absl::StatusOr<EngineStats> stats();

  /// Stops every actor (in-flight requests end without on_finish), then writes the topology's
  /// trace (with the metrics of the last drain) and routing record if it names them.
  /// Idempotent; errors: the writers'.
  absl::Status shutdown();

 private:
  ServingEngine() = default;

  const Server* server_ = nullptr;
  std::unique_ptr<caf::actor_system_config> cfg_;  // outlives sys_
  std::unique_ptr<caf::actor_system> sys_;
  std::shared_ptr<RunContext> ctx_;
  std::mutex mutex_;  // orders submissions (ids) and guards stopped_
  int64_t next_id_ = 0;
  bool stopped_ = false;
  engine::serving::RunMetrics last_metrics_;  // of the last drain (the trace's metadata)
};

}  // namespace muflow::actors
