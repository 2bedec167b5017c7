#include "actors/coordinator.hpp"

#include <algorithm>
#include <deque>
#include <limits>
#include <set>
#include <tuple>

#include "absl/container/node_hash_map.h"
#include "absl/strings/str_format.h"
#include "actors/messages.hpp"
#include "engine/serving/kv_admission.hpp"

namespace muflow::actors {
namespace {

using engine::dataflow::TokenMeta;

struct RequestState {
  engine::serving::Request req;
  int32_t rank = -1;
  int64_t fed = 0;  ///< prompt tokens sent so far
  RequestOutput out;
  bool finished = false;
  bool in_flight = false;  ///< barrier-free: a step of this request is in the dataflow
  bool cancel_requested = false;  ///< stop streaming; free its KV once no step is in flight
  bool reported = false;          ///< its output went to a drain() already
  RequestCallbacks callbacks;     ///< this request's own callbacks (may be empty)
};

struct CoordinatorState {
  RunContextPtr ctx;
  RunCallbacks callbacks;
  // Submitted requests by id, until finished and reported (a node map: references stay valid
  // while others are added or erased).
  absl::node_hash_map<int64_t, RequestState> requests;
  int64_t num_submitted = 0;                 // ids 0..num_submitted-1 were submitted
  int64_t peak_held = 0;                     // most entries `requests` had at once
  // Requests still to come, pulled as the clock reaches their arrival (null: none).
  engine::serving::RequestSourcePtr source;
  std::function<absl::Status(const engine::serving::Request&)> validate_source_request;
  bool source_materialized = false;  // SourceSubmission::materialized
  bool source_keeps_ids = false;      // SourceSubmission::keep_ids
  std::deque<int64_t> pending;               // not yet admitted, by arrival
  std::vector<std::vector<int64_t>> active;  // [rank] admitted, unfinished (admission order)
  std::vector<engine::serving::RankKv> kv;   // [rank] KV reservations (barrier-free admission)
  std::unique_ptr<engine::serving::MetricsRecorder> metrics;
  int64_t iteration = 0;
  int64_t outstanding = 0;                   // sampler reports still due this iteration
  std::vector<SampledBatchPtr> reports;
  bool in_flight = false, wake_pending = false, done = false;
  int64_t num_finished = 0, num_tokens = 0;
  int64_t finished_since_compact = 0;  ///< long-lived engines: since the last compaction
  double all_to_all_s = 0.0;  ///< virtual time spent in all-to-all transfers
  double all_to_all_bound_s = 0.0;  ///< their port-load lower bounds (b_max)
  std::vector<caf::actor> drain_waiters;  ///< receive a RunOutcomePtr when nothing is left
  absl::Status first_error;
  static inline const char* name = "muflow.coordinator";
};

using Self = caf::stateful_actor<CoordinatorState>;

constexpr int64_t kCompactEvery = 256;  ///< long-lived engines: finished requests per compaction
/// Batch runs: finished requests per compaction. Runs up to this size keep every request's
/// times (exact percentiles and load window); longer ones stay bounded in memory.
constexpr int64_t kCompactEveryBatch = 16384;

// Pacing::kPerRequest: each request's next step as soon as its last one returned.
bool per_request(const CoordinatorState& st) {
  return st.ctx->graph().pacing == Pacing::kPerRequest;
}

double now_s(Self* self) { return self->state.ctx->seconds_since_start(self->home_system().clock().now()); }

// Frees the output, prompt and callbacks of a finished request whose output went out already
// (the callbacks may hold the host's per-request state: an HTTP stream's buffers).
void forget_output(RequestState& rs) {
  const int64_t id = rs.req.id;
  rs.reported = true;
  rs.out = RequestOutput{};
  rs.out.request_id = id;
  rs.req.prompt = {};
  rs.req.prompt_text = {};
  rs.callbacks = RequestCallbacks{};
}

RequestState* find_request(CoordinatorState& st, int64_t id) {
  auto it = st.requests.find(id);
  return it == st.requests.end() ? nullptr : &it->second;
}

// Moves the busy intervals the stages of this process logged since the last call into the
// metrics (actors/busy_log.hpp); before anything reads busy time.
void take_busy(CoordinatorState& st) {
  if (!st.ctx->busy_log) return;
  for (const BusyLog::Interval& b : st.ctx->busy_log->take()) {
    st.metrics->on_device_busy(b.device, b.begin_s, b.end_s);
  }
}

// The outcome so far: the first error, cumulative metrics and, in id order, an entry per
// request the coordinator still holds: the outputs of finished requests not reported before
// (moved out) and empty ones for the others. Reported requests are forgotten (erased unless
// the run failed).
RunOutcomePtr take_outcome(Self* self) {
  auto& st = self->state;
  auto outcome = std::make_shared<RunOutcome>();
  outcome->status = st.first_error;
  std::vector<int64_t> ids;
  ids.reserve(st.requests.size());
  for (const auto& [id, r] : st.requests) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (int64_t id : ids) {
    RequestState& r = st.requests.at(id);
    if (r.finished && !r.reported) {
      outcome->outputs.push_back(std::move(r.out));
      forget_output(r);
      // A failing run (done) drains from inside a callback's caller, which still holds the
      // request: leave the record; the engine serves nothing more anyway.
      if (!st.done) st.requests.erase(id);
    } else {
      RequestOutput empty;
      empty.request_id = id;
      outcome->outputs.push_back(std::move(empty));
    }
  }
  take_busy(st);
  outcome->metrics = st.metrics->summarize(now_s(self));
  outcome->metrics.all_to_all_s = st.all_to_all_s;
  outcome->metrics.all_to_all_bound_s = st.all_to_all_bound_s;
  outcome->peak_requests_held = st.peak_held;
  return outcome;
}

// Answers the drain() waiters once no submitted request is left unfinished (or the engine
// failed).
void reply_drained(Self* self) {
  auto& st = self->state;
  if (st.drain_waiters.empty()) return;
  if (st.first_error.ok() && (st.num_finished < st.num_submitted || st.source)) return;
  RunOutcomePtr outcome = take_outcome(self);
  for (const caf::actor& w : st.drain_waiters) self->send(w, outcome);
  st.drain_waiters.clear();
}

// The engine failed: no more steps; every waiter and every unfinished request's on_finish
// hear of it.
void finish_run(Self* self) {
  auto& st = self->state;
  if (st.done) return;
  st.done = true;
  for (auto& [id, r] : st.requests) {
    if (r.finished || !r.callbacks.on_finish) continue;
    try {
      r.callbacks.on_finish(r.out, st.first_error);
    } catch (...) {
      // The engine is failing already; a throwing callback changes nothing.
    }
  }
  reply_drained(self);
}

void launch(Self* self);
bool pull(Self* self, double t);
bool notify_finished(Self* self, RequestState& rs);
bool end_pending(Self* self, RequestState& rs, FinishReason reason, double t);

void fail_run(Self* self, absl::Status status) {
  if (self->state.first_error.ok()) self->state.first_error = std::move(status);
  finish_run(self);
}

// KV-cache bytes request `r` can come to hold: its prompt plus the tokens it may generate,
// which generation caps at max_position_embeddings (so a huge max_new_tokens neither overflows
// nor asks for more than the request can use; prompts are shorter than that limit).
int64_t kv_need_bytes(const CoordinatorState& st, const engine::serving::Request& r) {
  const auto prompt = static_cast<int64_t>(r.prompt.size());
  const int64_t room = std::max<int64_t>(0, st.ctx->config.max_position_embeddings - prompt);
  return (prompt + std::min(r.max_new_tokens, room)) * st.ctx->kv_bytes_per_token;
}

// Admits arrived requests in arrival order while a rank can take the next one: barrier
// wirings pick the rank with the fewest active requests, the barrier-free one the rank with
// the most free KV-cache memory (AsyncMoE §3.1). False when the run failed.
bool admit(Self* self, double t) {
  auto& st = self->state;
  if (!pull(self, t)) return false;
  const auto& sched = st.ctx->topology.scheduler;
  while (!st.pending.empty() && st.requests.at(st.pending.front()).req.arrival_s <= t) {
    const int64_t id = st.pending.front();
    int32_t best = 0;
    if (per_request(st)) {
      const int64_t need = kv_need_bytes(st, st.requests.at(id).req);
      best = engine::serving::pick_rank_most_free_kv(st.kv, sched.max_batch_requests, need);
      if (best < 0) {
        const bool any_active = std::any_of(st.kv.begin(), st.kv.end(),
                                            [](const auto& k) { return k.active_requests > 0; });
        if (any_active) return true;  // wait until a request finishes
        fail_run(self, absl::ResourceExhaustedError(absl::StrFormat(
                           "request %d needs %d bytes of KV cache (%d prompt + %d output tokens), "
                           "more than any attention rank can hold",
                           id, need, st.requests.at(id).req.prompt.size(),
                           st.requests.at(id).req.max_new_tokens)));
        return false;
      }
      st.kv[best].reserved_bytes += need;
      ++st.kv[best].active_requests;
    } else {
      for (int32_t r = 1; r < st.ctx->num_ranks; ++r) {
        if (st.active[r].size() < st.active[best].size()) best = r;
      }
      if (static_cast<int64_t>(st.active[best].size()) >= sched.max_batch_requests) return true;
    }
    st.pending.pop_front();
    st.requests.at(id).rank = best;
    st.active[best].push_back(id);
    if (st.ctx->trace) {
      st.ctx->trace->instant("admit", st.ctx->placement.rank_device[best], 0, t * 1e6,
                             engine::trace::InstantScope::kGlobal,
                             nlohmann::json{{"request_id", id}, {"rank", best}});
    }
  }
  return true;
}

// Admission limit (`[scheduler] max_queued_requests`): rejects the newest of the requests that
// arrived by `t` and still wait to be admitted, beyond the limit, so the queue (and TTFT)
// stays bounded under overload. False when the run ended (a callback threw).
bool reject_overflow(Self* self, double t) {
  auto& st = self->state;
  const int64_t limit = st.ctx->topology.scheduler.max_queued_requests;
  if (limit <= 0) return true;
  int64_t arrived = 0;  // pending is ordered by arrival: the arrived requests are a prefix
  for (int64_t id : st.pending) {
    if (st.requests.at(id).req.arrival_s > t) break;
    ++arrived;
  }
  while (arrived > limit) {
    const auto it = st.pending.begin() + (arrived - 1);
    RequestState& rs = st.requests.at(*it);
    st.pending.erase(it);
    --arrived;
    if (!end_pending(self, rs, FinishReason::kRejected, t)) return false;
  }
  return true;
}

// Appends the next input of request `id` (its next prefill chunk within `budget` prompt
// tokens, or its last generated token) to `b`.
void add_step(CoordinatorState& st, int64_t id, int32_t r, int64_t& budget,
              engine::dataflow::TokenBatch& b) {
  RequestState& rs = st.requests.at(id);
  const auto prompt_len = static_cast<int64_t>(rs.req.prompt.size());
  if (rs.fed < prompt_len) {
    const int64_t chunk = std::min(prompt_len - rs.fed, budget);
    for (int64_t p = rs.fed; p < rs.fed + chunk; ++p) {
      TokenMeta m;
      m.request_id = id;
      m.position = p;
      m.token_id = rs.req.prompt[p];
      m.origin_rank = r;
      m.flags = (p == prompt_len - 1 ? engine::dataflow::kSample : 0) |
                (rs.req.return_prompt_logits ? engine::dataflow::kNeedsLogits : 0);
      b.tokens.push_back(m);
    }
    rs.fed += chunk;
    budget -= chunk;
  } else {
    TokenMeta m;
    m.request_id = id;
    m.position = prompt_len + static_cast<int64_t>(rs.out.output.size()) - 1;
    m.token_id = rs.out.output.back();
    m.origin_rank = r;
    m.flags = engine::dataflow::kSample;
    b.tokens.push_back(m);
  }
}

engine::dataflow::TokenBatchPtr new_input(int32_t rank, int64_t iteration) {
  auto b = std::make_shared<engine::dataflow::TokenBatch>();
  b->layer = {engine::dataflow::StageKind::kAttention, 0, rank};
  b->payload = engine::dataflow::Payload::kTokenIds;
  b->iteration = iteration;
  return b;
}

// Wakes the coordinator when the next pending request arrives (if that is in the future).
void wake_at_next_arrival(Self* self, double t) {
  auto& st = self->state;
  if (st.pending.empty() || st.wake_pending) return;
  const double arrival = st.requests.at(st.pending.front()).req.arrival_s;
  if (arrival <= t) return;  // arrived but waiting for room: a finishing request retries
  st.wake_pending = true;
  self->delayed_send(self, std::chrono::microseconds(static_cast<int64_t>((arrival - t) * 1e6) + 1),
                     wake_atom::value);
}

// Barrier-free pacing: every admitted request whose previous step came back gets its next
// step now; one batch per rank (the attention stage re-batches with whatever else queued).
void launch_per_request(Self* self) {
  auto& st = self->state;
  if (st.done) return;
  const double t = now_s(self);
  if (!admit(self, t) || !reject_overflow(self, t)) return;
  const auto& sched = st.ctx->topology.scheduler;
  bool any_in_flight = false;
  for (int32_t r = 0; r < st.ctx->num_ranks; ++r) {
    engine::dataflow::TokenBatchPtr b = new_input(r, st.iteration);
    int64_t budget = sched.max_prefill_tokens;
    for (int64_t id : st.active[r]) {
      RequestState& rs = st.requests.at(id);
      const bool prefill = rs.fed < static_cast<int64_t>(rs.req.prompt.size());
      if (!rs.in_flight && (budget > 0 || !prefill)) {
        add_step(st, id, r, budget, *b);
        rs.in_flight = true;
      }
      any_in_flight |= rs.in_flight;
    }
    if (b->num_tokens() > 0) self->send(st.ctx->actors.attention[0][r], batch_atom::value, b);
  }
  ++st.iteration;
  if (!any_in_flight && st.pending.empty()) return reply_drained(self);  // idle
  wake_at_next_arrival(self, t);
}

// Iteration pacing: one iteration at a time over every rank; every rank gets a batch,
// possibly empty, because every rank contributes to every barrier. Under sparse iterations
// only the ranks with tokens get one, and the collectives hear which ranks those are first.
void launch(Self* self) {
  auto& st = self->state;
  if (per_request(st)) return launch_per_request(self);
  if (st.done || st.in_flight) return;
  const double t = now_s(self);
  if (!admit(self, t) || !reject_overflow(self, t)) return;
  const auto& sched = st.ctx->topology.scheduler;
  std::vector<engine::dataflow::TokenBatchPtr> batches(st.ctx->num_ranks);
  int64_t total = 0;
  for (int32_t r = 0; r < st.ctx->num_ranks; ++r) {
    engine::dataflow::TokenBatchPtr b = new_input(r, st.iteration);
    int64_t budget = sched.max_prefill_tokens;
    for (int64_t id : st.active[r]) add_step(st, id, r, budget, *b);
    total += b->num_tokens();
    batches[r] = std::move(b);
  }
  if (total == 0) {
    if (st.pending.empty()) return reply_drained(self);  // idle
    if (!st.wake_pending) {
      const double gap = std::max(0.0, st.requests.at(st.pending.front()).req.arrival_s - t);
      st.wake_pending = true;
      self->delayed_send(self, std::chrono::microseconds(static_cast<int64_t>(gap * 1e6) + 1),
                         wake_atom::value);
    }
    return;
  }
  st.in_flight = true;
  if (!st.ctx->sparse_iterations) {
    st.outstanding = st.ctx->num_ranks;
    for (int32_t r = 0; r < st.ctx->num_ranks; ++r) {
      self->send(st.ctx->actors.attention[0][r], batch_atom::value, batches[r]);
    }
    return;
  }
  std::vector<int32_t> ranks;
  for (int32_t r = 0; r < st.ctx->num_ranks; ++r) {
    if (batches[r]->num_tokens() > 0) ranks.push_back(r);
  }
  // Enqueued in every collective's mailbox before any rank can contribute (one process: a
  // send enqueues at once), so a collective knows an iteration's ranks before its parts.
  const caf::message msg = caf::make_message(ranks_atom::value, st.iteration, ranks);
  for (const caf::actor& c : st.ctx->actors.dispatch) self->send(c, msg);
  for (const caf::actor& c : st.ctx->actors.combine) self->send(c, msg);
  st.outstanding = static_cast<int64_t>(ranks.size());
  for (int32_t r : ranks) self->send(st.ctx->actors.attention[0][r], batch_atom::value, batches[r]);
}

bool notify_finished_impl(Self* self, RequestState& rs);

// Hands finished request `rs` to the run's on_finish (the output stays for drain unless
// RunCallbacks::keep_outputs is false) and then to its own on_finish (the output is then
// forgotten). A forgotten request leaves the coordinator: `rs` must not be used after this.
// False when a callback threw (the run failed).
bool notify_finished(Self* self, RequestState& rs) {
  auto& st = self->state;
  const int64_t id = rs.req.id;
  const bool ok = notify_finished_impl(self, rs);
  // A failing run's drain may have taken (and erased) it already.
  if (RequestState* r = find_request(st, id); r && (r->reported || !st.callbacks.keep_outputs)) {
    st.requests.erase(id);
  }
  return ok;
}

bool notify_finished_impl(Self* self, RequestState& rs) {
  auto& st = self->state;
  if (st.callbacks.on_finish) {
    try {
      st.callbacks.on_finish(rs.out);
    } catch (const std::exception& e) {
      fail_run(self, absl::InternalError(std::string("on_finish callback threw: ") + e.what()));
      // finish_run skipped this request (already finished): its own on_finish still hears
      // of the failure, once.
      if (rs.callbacks.on_finish) {
        try {
          rs.callbacks.on_finish(rs.out, st.first_error);
        } catch (...) {
          // The run is failing already.
        }
        forget_output(rs);
      }
      return false;
    }
  }
  if (rs.callbacks.on_finish) {
    bool ok = true;
    try {
      rs.callbacks.on_finish(rs.out, absl::OkStatus());
    } catch (const std::exception& e) {
      fail_run(self, absl::InternalError(std::string("on_finish callback threw: ") + e.what()));
      ok = false;
    }
    // Delivered: keep no copy of its output or prompt, so a long-lived engine's memory per
    // finished request stays a small record (drain reports it empty).
    forget_output(rs);
    return ok;
  }
  return true;
}

// Counts one more finished request; the metrics of finished requests are folded every
// kCompactEvery of them in a long-lived engine, every kCompactEveryBatch in a batch run
// (bounded memory), whichever path finished them.
void count_finished(CoordinatorState& st) {
  ++st.num_finished;
  if (++st.finished_since_compact >= (st.ctx->long_lived ? kCompactEvery : kCompactEveryBatch)) {
    take_busy(st);
    st.metrics->compact();
    st.finished_since_compact = 0;
  }
}

// Ends request `rs`, still pending (never admitted), as cancelled or rejected at `t`: no KV to
// free; its on_finish hears of it. False when a callback threw (the run failed).
bool end_pending(Self* self, RequestState& rs, FinishReason reason, double t) {
  auto& st = self->state;
  rs.finished = true;
  rs.out.cancelled = reason == FinishReason::kCancelled;
  rs.out.finish_reason = reason;
  rs.out.finish_s = t;
  if (reason == FinishReason::kRejected) {
    st.metrics->on_reject(rs.req.id);
  } else {
    st.metrics->on_cancel(rs.req.id);
  }
  if (rs.req.sampling) st.ctx->request_sampling->erase(rs.req.id);
  if (st.ctx->trace && reason == FinishReason::kRejected) {
    st.ctx->trace->instant("reject", st.ctx->placement.rank_device[0], 0, t * 1e6,
                           engine::trace::InstantScope::kGlobal,
                           nlohmann::json{{"request_id", rs.req.id}, {"reason", "queue full"}});
  }
  count_finished(st);
  return notify_finished(self, rs);
}

// Ends request `rs` (admitted): it stopped (EOS, length) or was cancelled. Frees its KV cache
// (no step of it may be in flight) and calls its on_finish.
bool finish_request(Self* self, RequestState& rs, double t) {
  auto& st = self->state;
  rs.finished = true;
  rs.out.finish_s = t;
  rs.out.cancelled = rs.cancel_requested;
  if (rs.cancel_requested) {
    rs.out.finish_reason = FinishReason::kCancelled;
    st.metrics->on_cancel(rs.req.id);
  }
  if (rs.req.sampling) st.ctx->request_sampling->erase(rs.req.id);
  if (!rs.cancel_requested) st.metrics->on_finish(rs.req.id, t);
  if (st.ctx->trace) {
    st.ctx->trace->instant(
        "finish", st.ctx->placement.rank_device[rs.rank], 0, t * 1e6,
        engine::trace::InstantScope::kGlobal,
        nlohmann::json{
            {"request_id", rs.req.id}, {"rank", rs.rank}, {"output_tokens", rs.out.output.size()}});
  }
  count_finished(st);
  if (per_request(st)) {
    engine::serving::RankKv& k = st.kv[rs.rank];
    k.reserved_bytes -= kv_need_bytes(st, rs.req);
    --k.active_requests;
  }
  auto& act = st.active[rs.rank];
  act.erase(std::find(act.begin(), act.end(), rs.req.id));
  for (const auto& block : st.ctx->actors.attention) {
    if (st.ctx->graph().kv_replicated) {
      for (const caf::actor& replica : block) self->send(replica, release_atom::value, rs.req.id);
    } else {
      self->send(block[rs.rank], release_atom::value, rs.req.id);
    }
  }
  return notify_finished(self, rs);
}

// Cancelled requests whose last step returned: finish them (their KV is released).
void finish_cancelled(Self* self) {
  auto& st = self->state;
  const double t = now_s(self);
  for (auto& rank : st.active) {
    const std::vector<int64_t> ids = rank;  // finish_request edits the list
    for (int64_t id : ids) {
      RequestState& rs = st.requests.at(id);
      if (rs.cancel_requested && !rs.finished && !rs.in_flight && !finish_request(self, rs, t)) {
        return;  // a callback threw: the run ended
      }
    }
  }
}

// Applies sampled rows (reports of one iteration, or one report when barrier-free) in
// (request, position) order: prompt logits, generated tokens, streaming, stop conditions.
// False when the run ended (a callback threw).
bool apply_reports(Self* self, const std::vector<SampledBatchPtr>& reports) {
  auto& st = self->state;
  const double t = now_s(self);
  const engine::model::ModelConfig& c = st.ctx->config;
  std::vector<SampledToken*> rows;
  for (auto& rep : reports) {
    for (SampledToken& row : rep->rows) rows.push_back(&row);
  }
  std::sort(rows.begin(), rows.end(), [](const SampledToken* a, const SampledToken* b) {
    return std::tie(a->request_id, a->position) < std::tie(b->request_id, b->position);
  });
  for (SampledToken* row : rows) {
    RequestState* found = find_request(st, row->request_id);
    if (!found) continue;  // finished by an earlier row of this report and forgotten
    RequestState& rs = *found;
    const auto prompt_len = static_cast<int64_t>(rs.req.prompt.size());
    if (!row->logits.empty() && row->position < prompt_len) {
      if (rs.out.prompt_logits.empty()) rs.out.prompt_logits.resize(prompt_len * c.vocab_size);
      std::copy(row->logits.begin(), row->logits.end(),
                rs.out.prompt_logits.begin() + row->position * c.vocab_size);
    }
    if (row->token < 0 || rs.finished || rs.cancel_requested) continue;
    rs.out.output.push_back(row->token);
    if (rs.out.first_token_s < 0) rs.out.first_token_s = t;
    st.metrics->on_token(rs.req.id, t);
    ++st.num_tokens;
    if (st.callbacks.on_token || rs.callbacks.on_token) {
      try {
        if (st.callbacks.on_token) st.callbacks.on_token(rs.req.id, row->token);
        if (rs.callbacks.on_token) rs.callbacks.on_token(row->token);
      } catch (const std::exception& e) {
        fail_run(self, absl::InternalError(std::string("on_token callback threw: ") + e.what()));
        return false;
      }
    }
    const bool stop_at_eos =
        rs.req.sampling ? rs.req.sampling->stop_at_eos : st.ctx->topology.sampling.stop_at_eos;
    const bool eos = stop_at_eos && row->token == c.eos_token_id;
    const bool full = static_cast<int64_t>(rs.out.output.size()) >= rs.req.max_new_tokens;
    // The next input would sit at position row->position + 1: stop when that does not exist.
    const bool at_limit = row->position + 1 >= c.max_position_embeddings;
    if (eos || full || at_limit) {
      rs.out.finish_reason = eos    ? FinishReason::kEos
                             : full ? FinishReason::kLength
                                    : FinishReason::kMaxPosition;
      if (!finish_request(self, rs, t)) return false;  // a callback threw: the run ended
    }
  }
  if (st.callbacks.on_progress) {
    try {
      st.callbacks.on_progress(st.num_finished,
                               st.num_submitted + (st.source ? st.source->remaining() : 0),
                               st.num_tokens, now_s(self));
    } catch (const std::exception& e) {
      fail_run(self, absl::InternalError(std::string("on_progress callback threw: ") + e.what()));
      return false;
    }
  }
  return true;
}

void complete_iteration(Self* self) {
  auto& st = self->state;
  std::vector<SampledBatchPtr> reports = std::move(st.reports);
  st.reports.clear();
  if (!apply_reports(self, reports)) return;
  st.in_flight = false;
  finish_cancelled(self);
  ++st.iteration;
  launch(self);
}

// Barrier-free: one sampler report completes the current step of its requests.
void complete_step(Self* self, const SampledBatchPtr& report) {
  auto& st = self->state;
  for (int64_t id : report->requests) {
    if (RequestState* rs = find_request(st, id)) rs->in_flight = false;
  }
  if (!apply_reports(self, {report})) return;
  finish_cancelled(self);
  launch(self);
}

// Adds request `r` (its id is the next one) as pending, by (arrival, id).
void add_request(CoordinatorState& st, engine::serving::Request&& r, RequestCallbacks&& callbacks) {
  const int64_t id = r.id;
  RequestState& rs = st.requests[id];
  ++st.num_submitted;
  st.peak_held = std::max(st.peak_held, static_cast<int64_t>(st.requests.size()));
  rs.out.request_id = id;
  rs.out.prompt = r.prompt;
  rs.out.prompt_text = std::move(r.prompt_text);
  rs.out.arrival_s = r.arrival_s;
  rs.callbacks = std::move(callbacks);
  st.metrics->on_arrival(id, r.arrival_s);
  if (r.sampling) st.ctx->request_sampling->set(id, *r.sampling);
  rs.req = std::move(r);
  const auto by_arrival = [&st](int64_t a, int64_t b) {
    return std::tie(st.requests.at(a).req.arrival_s, a) <
           std::tie(st.requests.at(b).req.arrival_s, b);
  };
  st.pending.insert(std::upper_bound(st.pending.begin(), st.pending.end(), id, by_arrival), id);
}

// Takes submitted requests (their ids, in any order, are the next requests.size() ids; with
// `keep_ids` any ids the coordinator does not hold): pending by (arrival, id).
void submit(Self* self, std::vector<engine::serving::Request>& requests,
            std::vector<RequestCallbacks>& callbacks, bool keep_ids) {
  auto& st = self->state;
  const int64_t base = st.num_submitted;
  const auto n = static_cast<int64_t>(requests.size());
  if (st.source && n > 0) {
    return fail_run(self, absl::InternalError(
                              "requests submitted while a request source is still open"));
  }
  if (keep_ids) {
    std::set<int64_t> ids;
    for (const engine::serving::Request& r : requests) {
      if (r.id < 0 || st.requests.count(r.id) != 0 || !ids.insert(r.id).second) {
        return fail_run(self, absl::InternalError(absl::StrFormat(
                                  "submitted request id %d, which is negative or taken", r.id)));
      }
    }
  } else {
    std::vector<char> seen(n, 0);
    for (const engine::serving::Request& r : requests) {
      if (r.id < base || r.id >= base + n || seen[r.id - base]) {
        return fail_run(self, absl::InternalError(absl::StrFormat(
                                  "submitted request id %d; expected the ids %d..%d, each once",
                                  r.id, base, base + n - 1)));
      }
      seen[r.id - base] = 1;
    }
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    add_request(st, std::move(requests[i]),
                i < callbacks.size() ? std::move(callbacks[i]) : RequestCallbacks{});
  }
}

// Pulls requests from the source while none of the pending ones lies in the future: every
// request that arrived by `t` is pending then, plus the next one to arrive (its wake-up is
// scheduled), and no more. A request that fails validation fails the run (naming it). False
// when the run ended.
bool pull(Self* self, double t) {
  auto& st = self->state;
  while (st.source && (st.pending.empty() || st.requests.at(st.pending.back()).req.arrival_s <= t)) {
    std::optional<engine::serving::Request> r = st.source->next();
    if (!r) {
      st.source = nullptr;
      break;
    }
    // A materialized source's ids were checked with the list (0..n-1, any arrival order).
    if (!st.source_materialized && !st.source_keeps_ids) r->id = st.num_submitted;
    if (st.validate_source_request) {
      if (absl::Status s = st.validate_source_request(*r); !s.ok()) {
        st.source = nullptr;
        fail_run(self, std::move(s));  // its message names the request
        return false;
      }
    }
    add_request(st, std::move(*r), RequestCallbacks{});
  }
  return true;
}

// Cancels request `id`: it streams nothing more; pending, it is dropped at once; admitted, it
// finishes (KV released) as soon as none of its steps is in flight.
void cancel(Self* self, int64_t id) {
  auto& st = self->state;
  RequestState* found = find_request(st, id);
  if (!found) return;  // unknown, or finished and forgotten
  RequestState& rs = *found;
  if (rs.finished || rs.cancel_requested) return;
  rs.cancel_requested = true;
  const double t = now_s(self);
  if (rs.rank < 0) {
    st.pending.erase(std::find(st.pending.begin(), st.pending.end(), id));
    if (!end_pending(self, rs, FinishReason::kCancelled, t)) return;
  } else if ((per_request(st) ? !rs.in_flight : !st.in_flight) && !finish_request(self, rs, t)) {
    return;
  }
  if (!st.done) launch(self);  // room for a pending request, or idle
}

caf::behavior coordinator_behavior(Self* self, RunContextPtr ctx, RunCallbacks callbacks) {
  auto& st = self->state;
  st.ctx = ctx;
  st.callbacks = std::move(callbacks);
  st.active.resize(ctx->num_ranks);
  st.kv.resize(ctx->num_ranks);
  for (int64_t r = 0; r < ctx->num_ranks; ++r) {
    if (r < static_cast<int64_t>(ctx->kv_capacity_bytes.size())) {
      st.kv[r].capacity_bytes = ctx->kv_capacity_bytes[r];
    }
  }
  st.metrics = std::make_unique<engine::serving::MetricsRecorder>(ctx->placement.num_devices);
  return {
      [=](start_atom) {
        // A stage that dies (e.g. an exception escaping a handler) must fail the run, not
        // leave the coordinator waiting for its report forever.
        self->state.ctx->actors.for_each_wiring_actor(
            [&](const caf::actor& a) { self->monitor(a); });
        self->set_down_handler([=](caf::down_msg& msg) {
          auto& s = self->state;
          if (s.done) return;
          if (s.first_error.ok()) {
            s.first_error = absl::InternalError(
                "an actor of the wiring stopped unexpectedly: " +
                self->home_system().render(msg.reason));
          }
          finish_run(self);
        });
      },
      [=](submit_atom, const SubmissionPtr& sub) {
        if (self->state.done) {
          for (RequestCallbacks& cb : sub->callbacks) {
            try {
              if (cb.on_finish) cb.on_finish(RequestOutput{}, self->state.first_error);
            } catch (...) {
              // The engine failed already; nothing more to report.
            }
          }
          return;
        }
        submit(self, sub->requests, sub->callbacks, sub->keep_ids);
        if (!self->state.done) launch(self);
      },
      [=](submit_atom, const SourceSubmissionPtr& sub) {
        auto& s = self->state;
        if (s.done) return;
        if (s.source) {
          return fail_run(self, absl::InternalError("a second request source was submitted "
                                                    "while the first is still open"));
        }
        s.source = sub->source;
        s.validate_source_request = sub->validate;
        s.source_materialized = sub->materialized;
        s.source_keeps_ids = sub->keep_ids;
        launch(self);
      },
      [=](cancel_atom, int64_t id) {
        if (!self->state.done) cancel(self, id);
      },
      [=](cancel_all_atom) {
        auto& s = self->state;
        if (s.done) return;
        if (s.source_materialized && !pull(self, std::numeric_limits<double>::infinity())) {
          return;  // the run failed
        }
        s.source = nullptr;  // requests yet to arrive are never made
        // The waiting ones at once, in id order (one pass: cancel() would search the queue
        // for each, quadratic in a queue of 10^5 after an overload), then the admitted ones.
        std::vector<int64_t> waiting(s.pending.begin(), s.pending.end());
        s.pending.clear();
        std::sort(waiting.begin(), waiting.end());
        const double t = now_s(self);
        for (int64_t id : waiting) {
          RequestState& rs = s.requests.at(id);
          rs.cancel_requested = true;
          if (!end_pending(self, rs, FinishReason::kCancelled, t)) return;  // a callback threw
        }
        std::vector<int64_t> admitted;
        for (const auto& rank : s.active) admitted.insert(admitted.end(), rank.begin(), rank.end());
        std::sort(admitted.begin(), admitted.end());
        for (int64_t id : admitted) {
          if (s.done) break;
          cancel(self, id);
        }
        if (!s.done) launch(self);  // a run with nothing left drains
      },
      [=](drain_atom, const caf::actor& reply_to) {
        self->state.drain_waiters.push_back(reply_to);
        reply_drained(self);
      },
      [=](stats_atom) -> EngineStatsPtr {
        auto& s = self->state;
        auto stats = std::make_shared<EngineStats>();
        stats->num_waiting = static_cast<int64_t>(s.pending.size());
        for (const auto& rank : s.active) stats->num_running += static_cast<int64_t>(rank.size());
        stats->num_finished = s.num_finished;
        take_busy(s);
        stats->metrics = s.metrics->summarize(now_s(self));
        stats->metrics.all_to_all_s = s.all_to_all_s;
        stats->metrics.all_to_all_bound_s = s.all_to_all_bound_s;
        stats->moe_tokens = s.metrics->moe_tokens_by_block();
        return stats;
      },
      [=](wake_atom) {
        self->state.wake_pending = false;
        launch(self);
      },
      [=](sampled_atom, const SampledBatchPtr& report) {
        auto& s = self->state;
        if (s.done) return;
        take_busy(s);  // bounds the log to about one iteration's stage runs
        if (per_request(s)) return complete_step(self, report);
        s.reports.push_back(report);
        if (--s.outstanding == 0) complete_iteration(self);
      },
      [=](busy_atom, int64_t device, double begin_s, double end_s) {
        self->state.metrics->on_device_busy(device, begin_s, end_s);
      },
      [=](load_atom, int64_t block, int64_t iteration, const std::vector<int64_t>& per_device,
          double done_s, int64_t tokens_rebalanced) {
        self->state.metrics->on_layer_iteration(block, iteration, per_device);
        self->state.metrics->on_layer_start(block, iteration, done_s);
        self->state.metrics->on_rebalance(tokens_rebalanced);
      },
      [=](layer_atom, int64_t block, int64_t iteration, double done_s,
          const std::vector<double>& finish_s) {
        self->state.metrics->on_layer_end(block, iteration, done_s, finish_s);
      },
      [=](fetch_atom, int64_t fetches, int64_t restores, double stall_s) {
        self->state.metrics->on_expert_fetches(fetches, restores, stall_s);
      },
      [=](rows_atom, bool dispatch, int64_t remote, int64_t rows) {
        self->state.metrics->on_all_to_all_rows(dispatch, remote, rows);
      },
      [=](a2a_atom, double seconds, double bound_s) {
        self->state.all_to_all_s += seconds;
        self->state.all_to_all_bound_s += bound_s;
      },
      [=](failed_atom, const std::string& what) {
        auto& s = self->state;
        if (s.first_error.ok()) s.first_error = absl::InternalError(what);
        finish_run(self);
      },
  };
}

}  // namespace

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kEos: return "eos";
    case FinishReason::kLength: return "length";
    case FinishReason::kMaxPosition: return "max_position";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kRejected: return "rejected";
    case FinishReason::kNone: break;
  }
  return "none";
}

caf::actor spawn_coordinator(caf::actor_system& sys, RunContextPtr ctx, RunCallbacks callbacks) {
  return sys.spawn(coordinator_behavior, std::move(ctx), std::move(callbacks));
}

}  // namespace muflow::actors
