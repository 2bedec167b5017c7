#pragma once
/// \file
/// The coordinator actor: admits requests (load balancer over attention DP ranks), runs
/// continuous batching iteration by iteration (chunked prefill + decode), collects sampled
/// tokens, streams them, and owns the run's metrics (ARCHITECTURE.md §3).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "absl/status/status.h"
#include "actors/run_context.hpp"
#include "engine/serving/metrics.hpp"
#include "engine/serving/request.hpp"
#include "engine/serving/request_source.hpp"

namespace muflow::actors {

/// What one request produced.
/// Why a request stopped generating.
enum class FinishReason {
  kNone,         ///< not finished (or the engine failed first)
  kEos,          ///< generated the model's EOS token (and stop-at-EOS is on)
  kLength,       ///< generated max_new_tokens
  kMaxPosition,  ///< the next token would sit past the model's max_position_embeddings
  kCancelled,    ///< cancel() before it finished
  kRejected,     ///< refused at arrival: `[scheduler] max_queued_requests` were waiting
};

/// "eos", "length", "max_position", "cancelled", "rejected" or "none".
const char* finish_reason_name(FinishReason reason);

struct RequestOutput {
  int64_t request_id = 0;
  std::vector<int32_t> prompt;
  std::string prompt_text;            ///< the prompt's text when the workload gave text
  std::vector<int32_t> output;        ///< generated token ids (EOS included when it stopped there)
  std::vector<float> prompt_logits;   ///< [prompt_len, vocab] when the request asked for them
  double arrival_s = 0, first_token_s = -1, finish_s = -1;  ///< seconds since run start
  bool cancelled = false;  ///< cancelled before it finished (output holds what it streamed)
  FinishReason finish_reason = FinishReason::kNone;
};

/// A worker process lost during a run across processes, and the run's recovery from it (#18
/// item 5; Server::run). Times are seconds since the run's start, on the driver's clock.
struct RunRecovery {
  std::string lost;  ///< which worker and why (ProcessGroup::LostWorker::description)
  /// For a ServingEngine: the lost workers that had answered again and that the new wiring's
  /// setup took back (ProcessGroup::ReturnedWorker::description), whether a return or a loss
  /// made the engine replace its wiring; empty if none. A record of a return alone has `lost`
  /// empty; one whose returned worker could not be joined or set up after all has `lost` say
  /// why (the new wiring is then the survivors'). The wiring is replaced the same way (its
  /// unfinished requests re-admitted), so the fields below mean the same with "the loss" read
  /// as "the return".
  std::string rejoined;
  double detected_s = 0.0;  ///< when the driver noticed the loss
  /// When the next attempt started (survivors re-joined, devices re-placed).
  double resumed_s = 0.0;
  double first_token_s = -1;  ///< the first token generated after the loss; -1 if none was
  /// Requests taken and unfinished at the loss, re-admitted with their prompt and the tokens
  /// they had generated re-prefilled (the others had finished, or had not arrived yet); for a
  /// ServingEngine, also those submitted while the recovery was under way.
  int64_t readmitted_requests = 0;
};

/// The result of one run: status (first error, if any), outputs indexed by request id, metrics.
struct RunOutcome {
  absl::Status status;
  std::vector<RequestOutput> outputs;
  engine::serving::RunMetrics metrics;
  /// Server::run: RunCallbacks::stop_requested returned true and the unfinished requests
  /// were cancelled.
  bool stopped = false;
  /// Server::run: events the trace recorder refused past its cap (0 without a trace); see
  /// `trace_warning`.
  int64_t num_trace_dropped_events = 0;
  /// Server::run: empty, or engine::trace::TraceRecorder::dropped_warning() (also written to
  /// the trace's otherData.warning).
  std::string trace_warning;
  /// Most requests the coordinator held at once (waiting, running, or finished and waiting
  /// for drain): what its memory grows with. Bounded under any load when requests come from
  /// a source with RunCallbacks::keep_outputs false and `[scheduler] max_queued_requests` set.
  int64_t peak_requests_held = 0;
  /// Server::run across processes: every worker lost during the run and recovered from, in
  /// order (empty in a run that lost none). After a recovery the totals of `metrics`
  /// (requests, completed, rejected, output tokens, duration, output tokens/s) cover the whole
  /// run; its latency, device, MoE and all-to-all statistics cover the attempt after the last
  /// recovery only (where a re-admitted request's TTFT is its wait for its first token after
  /// the recovery), and so does `peak_requests_held`.
  std::vector<RunRecovery> recoveries;
  /// Server::run after Server::set_keep_trace(true): the run's finished trace, otherData
  /// included (what the topology's trace file gets, when it names one); read it with
  /// engine::trace::visit_recorded_events. Null otherwise.
  std::shared_ptr<const engine::trace::TraceRecorder> trace;
};
using RunOutcomePtr = std::shared_ptr<RunOutcome>;

/// A live engine's state now (ServingEngine::stats, `muflow serve`'s /metrics).
struct EngineStats {
  int64_t num_waiting = 0;   ///< submitted, not yet admitted (KV or batch limits)
  int64_t num_running = 0;   ///< admitted and unfinished
  int64_t num_finished = 0;  ///< finished or cancelled since start
  /// Since start: throughput, TTFT/ITL, per-device busy %, MoE balance, all-to-all time.
  engine::serving::RunMetrics metrics;
  /// [block][device]: expert tokens (token-expert pairs) each device computed in each MoE
  /// block since start.
  std::vector<std::vector<int64_t>> moe_tokens;
  /// Tokens waiting in the μ-queues of each stage kind now (filled by ServingEngine::stats).
  int64_t queued_attention_tokens = 0, queued_expert_tokens = 0, queued_sampler_tokens = 0;
  /// Across processes: every worker lost and recovered from, or taken back, since start
  /// (ServingEngine).
  std::vector<RunRecovery> recoveries;
  /// Across processes: [device] the process that hosts it in the current wiring (0: the
  /// driver; worker i of `[[cluster.workers]]`: i + 1), which changes when a worker is lost or
  /// taken back (filled by ServingEngine::stats). Empty in one process.
  std::vector<uint32_t> device_process;
};
using EngineStatsPtr = std::shared_ptr<EngineStats>;

/// Callbacks into the host application. on_token, on_progress and on_finish are called from
/// the coordinator actor's thread, one at a time; they must not block for long (they delay
/// the next iteration); one that throws fails the run (Internal, naming the callback).
struct RunCallbacks {
  /// A token was generated for a request (streaming).
  std::function<void(int64_t request_id, int32_t token)> on_token;
  /// After every iteration: finished requests, total requests, generated tokens so far, and
  /// the run's clock (seconds since the run started: virtual time on sim, real time since this
  /// attempt started on cpu and cuda).
  std::function<void(int64_t num_finished, int64_t num_requests, int64_t num_tokens,
                     double clock_s)>
      on_progress;
  /// A request finished, as soon as it did (so a host can write results as they come):
  /// `out.finish_reason` is kEos, kLength, kMaxPosition or kCancelled. Unlike
  /// RequestCallbacks::on_finish, the coordinator keeps the output: the drain outcome (what
  /// Server::run returns) still holds every request's. Not called for requests left
  /// unfinished by a failing run.
  std::function<void(const RequestOutput& out)> on_finish;
  /// Server::run / run_colocated only (the coordinator ignores it): polled on the thread that
  /// called run, about every 50 ms of real time on cpu and between virtual-time steps on sim.
  /// Once it returns true, every unfinished request is cancelled (finish_reason kCancelled,
  /// outputs hold what they generated; on_finish is called for each) and the run ends
  /// normally with `RunOutcome::stopped` set: metrics so far, trace written. Must be cheap
  /// and thread-safe (e.g. reads a flag a signal handler sets).
  std::function<bool()> stop_requested;
  /// False: a finished request's output goes to on_finish (and the request's own on_finish)
  /// only, and the coordinator forgets the request at once, so a run's memory does not grow
  /// with the requests it served (`muflow run` over a long Poisson load); the drain outcome's
  /// `outputs` then holds none of them. True (default): the drain outcome holds every output.
  bool keep_outputs = true;
};

/// One request's own callbacks (called from the coordinator actor's thread, one at a time;
/// they must not block for long).
struct RequestCallbacks {
  /// A token was generated for this request (streaming).
  std::function<void(int32_t token)> on_token;
  /// The request finished (stopped at EOS or its length, or was cancelled: `out.cancelled`),
  /// or the engine failed (`status` says why; `out` holds what was generated).
  std::function<void(const RequestOutput& out, const absl::Status& status)> on_finish;
};

/// Requests submitted together (ids continue the coordinator's, in any order, unless
/// `keep_ids`; arrival times in seconds since the run's start), with their callbacks (empty or
/// one per request).
struct Submission {
  std::vector<engine::serving::Request> requests;
  std::vector<RequestCallbacks> callbacks;
  /// The requests carry their ids (each >= 0 and not held by the coordinator now, any order)
  /// instead of continuing the coordinator's: a long-lived engine across processes re-admits
  /// its unfinished requests under their ids after a lost worker, and numbers later ones
  /// itself (seeded sampling draws depend on the id).
  bool keep_ids = false;
};
using SubmissionPtr = std::shared_ptr<Submission>;

/// A request source to serve (engine/serving/request_source.hpp): the coordinator takes each
/// request from it when the clock reaches the previous one's arrival, gives it the next id
/// (a `materialized` source keeps its checked ids),
/// checks it with `validate` (when set; a failure fails the run, naming the request) and
/// forgets the source once it is empty. One source at a time, and no Submission while it is
/// open.
struct SourceSubmission {
  engine::serving::RequestSourcePtr source;
  std::function<absl::Status(const engine::serving::Request&)> validate;
  /// The requests exist already (Server::run given a list): a cancel_all_atom cancels those
  /// yet to arrive too (each reported as cancelled), instead of never making them.
  bool materialized = false;
  /// The source's requests carry their ids (unique, any order): the coordinator keeps them
  /// instead of numbering the requests 0, 1, ... as it takes them (Server::run across
  /// processes, which re-admits a run's unfinished requests under their ids after a lost
  /// worker: seeded sampling draws depend on the id).
  bool keep_ids = false;
};
using SourceSubmissionPtr = std::shared_ptr<SourceSubmission>;

/// Spawns the coordinator of a run whose actors are in ctx->actors. Protocol (any sender):
///  - `(start_atom)` once: it monitors the wiring's actors (a dead one fails the run);
///  - `(submit_atom, SubmissionPtr)`: requests join while the engine runs (continuous
///    batching), admitted at their arrival time;
///  - `(submit_atom, SourceSubmissionPtr)`: requests pulled from a source as they arrive;
///  - `(cancel_atom, int64_t id)`: the request streams nothing more and its KV cache is freed as
///    soon as no step of it is in flight;
///  - `(cancel_all_atom)`: cancels every unfinished request and drops the source (requests
///    that had not arrived are never made, unless the source is `materialized`);
///  - `(stats_atom)` → EngineStatsPtr: counts and metrics since start (μ-queue depths 0);
///  - `(drain_atom, reply_to)`: `reply_to` gets a RunOutcomePtr once every submitted request
///    finished and the source (if any) is empty: outputs, in id order, of the requests the
///    coordinator still holds (those neither drained before, nor handed to their own
///    on_finish, nor to the run's on_finish with keep_outputs false: it forgets those);
///    metrics since the start. At once when the run failed (a stage, or a callback that
///    threw).
caf::actor spawn_coordinator(caf::actor_system& sys, RunContextPtr ctx, RunCallbacks callbacks);

}  // namespace muflow::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(muflow::actors::RunOutcomePtr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(muflow::actors::EngineStatsPtr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(muflow::actors::SubmissionPtr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(muflow::actors::SourceSubmissionPtr)
