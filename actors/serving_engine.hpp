#pragma once
/// \file
/// A long-lived engine: the actors of one Server's wiring are spawned once and serve requests
/// submitted while they run (continuous batching), until shutdown. What a serving front end
/// (HTTP, a host application) drives; Server::run is the batch client of the same coordinator
/// protocol (actors/coordinator.hpp).

#include <caf/all.hpp>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/statusor.h"
#include "actors/coordinator.hpp"
#include "actors/run_context.hpp"
#include "actors/server.hpp"
#include "engine/serving/request.hpp"

namespace muflow::actors {

/// The actors of one Server, spawned once and fed requests as they come.
///
/// Across processes (a topology with `[[cluster.workers]]`, #18): the workers host their
/// devices for the engine's whole life, and the engine survives a lost worker. When the
/// Server's process group loses one (its process was killed, its connection broke), the
/// engine stops the wiring, hosts the lost devices on the survivors and serves every
/// submitted, unfinished request again under its id with its prompt followed by the tokens it
/// had streamed (re-prefilled; actors/readmission.hpp says why the continuation is the
/// fault-free one). Callbacks see each request once, as if nothing had happened; requests
/// submitted meanwhile join the next wiring. Recoveries are reported by drain and stats.
///
/// Thread safety: submit, cancel, drain, stats and kv_cache_bytes may be called from any host
/// thread, concurrently. Callbacks run on the coordinator actor's thread, one at a time, and
/// must not block for long nor call back into this engine synchronously (drain would wait on
/// the thread that must answer it); across processes, when a recovery fails, the unfinished
/// requests' on_finish hear of it from the engine's recovery thread. Destroying the engine
/// shuts it down.
class ServingEngine {
 public:
  /// Spawns `server`'s actors on CAF's threaded scheduler (one worker per device, at most the
  /// cores); across processes, has the Server's process group (Server::set_process_group)
  /// start its workers' share first, and holds the group until shutdown (no Server::run on
  /// the same Server meanwhile). `server` must outlive the engine. `callbacks` apply to every
  /// request (streaming and progress; `stop_requested` is not used). Errors:
  /// FailedPrecondition on the sim backend (virtual time needs every request up front: use
  /// Server::run) and for `[[cluster.workers]]` without a process group; the run context's
  /// and the process group's errors (a worker that cannot be reached or set up, named).
  static absl::StatusOr<std::unique_ptr<ServingEngine>> start(const Server& server,
                                                              RunCallbacks callbacks = {});
  ~ServingEngine();
  ServingEngine(const ServingEngine&) = delete;
  ServingEngine& operator=(const ServingEngine&) = delete;

  /// Submits `request` now: its id is assigned here (ids count up from 0 in submission
  /// order; the given id is ignored) and its arrival time is now. Returns the id. Errors:
  /// InvalidArgument for a request Server::run would refuse (empty prompt, token outside the
  /// vocabulary, max_new_tokens < 1, prompt too long); FailedPrecondition after shutdown or
  /// after a failed recovery (the message says why).
  absl::StatusOr<int64_t> submit(engine::serving::Request request, RequestCallbacks callbacks = {});

  /// Cancels request `id`: it streams no more tokens, its on_finish reports `cancelled`, and
  /// its KV cache is freed as soon as no step of it is in flight. Unknown or finished ids are
  /// ignored.
  void cancel(int64_t id);

  /// Blocks until every submitted request finished (or was cancelled), then returns the
  /// outputs, in id order, of the requests neither drained before nor handed to their own
  /// on_finish (the engine forgets a request once its output was delivered, so its memory
  /// does not grow with the requests served) and the metrics since start. Across processes a
  /// lost worker does not end the wait: it goes on over the recovered wiring, and the outcome
  /// lists the recoveries so far (RunOutcome::recoveries; metrics totals cover the engine's
  /// life, its latency, device and MoE statistics the time since the last recovery).
  /// Errors: the run's first error (a stage or a callback failed, a recovery failed, an actor
  /// of the wiring stopped for a reason other than a lost worker); FailedPrecondition after
  /// shutdown.
  absl::StatusOr<RunOutcome> drain();

  /// KV-cache bytes held by all attention stages now (asks each stage; across processes each
  /// worker adds up its own; during a recovery, the next wiring's). Across processes the
  /// release of a request that finished just before may not be counted yet: it travels to the
  /// worker on the data plane, the question on the control plane, and neither waits for the
  /// other (it is counted within milliseconds). Errors:
  /// FailedPrecondition after shutdown; the engine's failure (a recovery failed, an actor of
  /// the wiring stopped); Internal when a stage does not answer; Unavailable when a worker
  /// does not.
  absl::StatusOr<int64_t> kv_cache_bytes();

  /// The engine's state now: waiting / running / finished requests, metrics since start
  /// (per-device busy %, MoE balance, TTFT/ITL), expert tokens per block and device, and the
  /// tokens queued in every stage's μ-queue summed per stage kind (across processes the
  /// workers' too), the recoveries from lost workers and the workers taken back when they
  /// came back, and which process hosts each device now. After a recovery the request and
  /// token totals cover the engine's life, the latency, device, MoE and queue figures the
  /// wiring since the last recovery; during one, it waits for the next wiring. Asks the
  /// coordinator and every stage (one round trip each; cost grows with the requests served so
  /// far, since the metrics are summarized from the recorded events). Errors:
  /// FailedPrecondition after shutdown; the engine's failure (a recovery failed, an actor of
  /// the wiring stopped); Internal when an actor does not answer within 10 s; Unavailable when
  /// a worker does not.
  absl::StatusOr<EngineStats> stats();

  /// Stops every actor (in-flight requests end without on_finish), then writes the topology's
  /// trace (with the metrics of the last drain; across processes with the workers' devices,
  /// since the last recovery) and routing record if it names them, and releases the workers.
  /// Idempotent; errors: the writers'.
  absl::Status shutdown();

 private:
  struct Incarnation;  // one actor system and wiring: for life, or until a worker is lost
  struct Ledger;       // across processes: the unfinished requests, to re-admit them

  ServingEngine() = default;
  // Builds an actor system with the server's wiring (across processes with the group's
  // workers, under group_mu_) and its coordinator, started (the caller sets its offset_s).
  absl::StatusOr<std::shared_ptr<Incarnation>> build_incarnation();
  // build_incarnation, again on the survivors while a build fails because the group lost a
  // worker during it (at most once per worker; under group_mu_).
  absl::StatusOr<std::shared_ptr<Incarnation>> build_on_survivors();
  // The callbacks the coordinator of `inc` calls for request `id` (across processes): they
  // record what it streams in the ledger and hand the host its output as one run's.
  RequestCallbacks wrap(int64_t id, std::shared_ptr<const RequestCallbacks> user,
                        const Incarnation& inc);
  // Across processes: waits until an actor of the current wiring stops or a lost worker comes
  // back (ProcessGroup::returned_workers, polled); when the group lost a worker, or one came
  // back, builds the next wiring and re-admits the unfinished requests. Runs on supervisor_
  // until shutdown or a failure that is not a lost worker.
  void supervise();
  void recover(const std::shared_ptr<Incarnation>& old);
  // Across processes, when a lost worker answered again (ProcessGroup::returned_workers):
  // replaces the wiring with one that hosts its devices there again, as a recovery does.
  void take_back(const std::shared_ptr<Incarnation>& old);
  // Stops `old`, builds the next wiring on the group's live workers and re-admits the
  // unfinished requests; `r` is recorded (its resumed_s and readmitted_requests set here);
  // `what` names the cause in the engine's failure if no wiring can be built.
  void replace_wiring(const std::shared_ptr<Incarnation>& old, RunRecovery r,
                      const std::string& what);
  // Adds the requests and tokens of the wirings before the current one to `m`'s totals.
  void add_earlier(engine::serving::RunMetrics& m);
  // What `inc`'s stages hold, the workers' included; its coordinator's stats with them.
  absl::StatusOr<StageLoad> stage_load(const Incarnation& inc);
  absl::StatusOr<EngineStats> stats_of(const Incarnation& inc);
  // After a question to `inc` failed: when a lost worker is the cause, waits until a
  // recovery replaced `inc` (or failed, or the engine stopped) and returns true (ask again).
  bool await_replacement(const std::shared_ptr<Incarnation>& inc);
  // True when a recovery replaced `inc` (and the engine neither stopped nor failed).
  bool replaced(const std::shared_ptr<Incarnation>& inc);
  // The current wiring; FailedPrecondition after shutdown, or the engine's failure.
  absl::StatusOr<std::shared_ptr<Incarnation>> current_wiring();
  // `ask(current wiring)`, asked again of the next wiring when a recovery intervened; the
  // engine's failure or FailedPrecondition after shutdown instead (stats, kv_cache_bytes).
  template <class T, class Ask>
  absl::StatusOr<T> ask_current(Ask&& ask);

  const Server* server_ = nullptr;
  RunCallbacks callbacks_;            // the host's
  ProcessGroup* group_ = nullptr;     // the Server's, across processes; else null
  std::mutex mutex_;                  // orders submissions (ids); guards the fields below
  std::shared_ptr<Incarnation> inc_;  // the current wiring
  int64_t next_id_ = 0;
  bool stopped_ = false;
  absl::Status failed_;  // a recovery that failed, or a wiring that stopped for another reason
  std::condition_variable changed_;           // inc_ replaced, failed_ set, or stopped_
  engine::serving::RunMetrics last_metrics_;  // of the last drain (the trace's metadata)
  std::shared_ptr<Ledger> ledger_;            // across processes; else null
  std::mutex group_mu_;                       // one call into the group at a time
  std::thread supervisor_;                    // across processes
};

}  // namespace muflow::actors
