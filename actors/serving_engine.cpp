#include "actors/serving_engine.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "actors/graph_builder.hpp"
#include "actors/messages.hpp"
#include "actors/readmission.hpp"
#include "actors/stage_probe.hpp"
#include "actors/wirings/device_policy.hpp"
#include "engine/seconds_between.hpp"
#include "spdlog/spdlog.h"

namespace muflow::actors {
namespace {

using Clock = std::chrono::steady_clock;
using engine::seconds_between;

// For an actor's or a worker's answer to a host's question (stats, KV bytes).
constexpr std::chrono::seconds kAnswerTimeout{10};
// How often the supervisor looks whether a lost worker answered again (the group tries to
// reach them on its own schedule: ClusterDriverOptions::rejoin_interval).
constexpr std::chrono::milliseconds kReturnPoll{100};

// Forgets, when it goes out of scope, the actor system this host thread last made a scoped
// actor in. CAF 0.17 keeps that system's logger in a thread-local reference (scoped_actor's
// constructor sets it), and an actor system's destructor waits until its logger is released:
// a host thread that once asked a wiring that a recovery replaced would make the destruction
// of that wiring's system wait forever. Every public entry that asks actors from a host
// thread holds one.
struct HostThreadScope {
  HostThreadScope() = default;
  HostThreadScope(const HostThreadScope&) = delete;
  HostThreadScope& operator=(const HostThreadScope&) = delete;
  ~HostThreadScope() { caf::logger::set_current_actor_system(nullptr); }
};

// Stops the coordinator and every actor of the wiring (remote handles included).
void stop_actors(const RunContext& ctx) {
  auto stop = [](const caf::actor& a) { caf::anon_send_exit(a, caf::exit_reason::user_shutdown); };
  ctx.actors.for_each_wiring_actor(stop);
  if (ctx.actors.coordinator) stop(ctx.actors.coordinator);
}

}  // namespace

struct ServingEngine::Incarnation {
  std::unique_ptr<caf::actor_system_config> cfg;  // outlives sys
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<RunContext> ctx;
  // Across processes: [device] hosted by this process (a copy: the group's layout lives only
  // until the group closes this wiring's run). Empty in one process (every device).
  std::vector<bool> hosted;
  std::vector<uint32_t> device_process;  // [device] its process (EngineStats::device_process)
  double offset_s = 0;     // its clock's origin, in seconds after the engine's
  size_t lost_before = 0;  // workers the group had lost when it was built
  size_t returned_before = 0;  // lost workers that had come back when it was built
  // Set before the engine stops this wiring to replace it: its requests' failures are the
  // replacement's, not the host's (read by their callbacks, on its coordinator's thread).
  std::shared_ptr<std::atomic<bool>> retired = std::make_shared<std::atomic<bool>>(false);
};

struct ServingEngine::Ledger {
  struct Entry {
    ResumableRequest r;  // arrival on the engine's clock
    std::shared_ptr<const RequestCallbacks> user;
    bool cancel_requested = false;
  };
  std::mutex mu;                  // after ServingEngine::mutex_ when both are held
  Clock::time_point origin;       // the engine's clock: the first wiring's start (set once)
  std::map<int64_t, Entry> live;  // submitted, unfinished
  std::map<int64_t, RequestOutput> undrained;  // finished, for the next drain
  // Counts of the current wiring, and of the wirings before it.
  int64_t tokens = 0, finished = 0, completed = 0, rejected = 0;
  int64_t earlier_tokens = 0, earlier_finished = 0, earlier_completed = 0, earlier_rejected = 0;
  std::vector<RunRecovery> recoveries;
  bool awaiting_first_token = false;  // since the last recovery, until a token comes
};

absl::StatusOr<std::unique_ptr<ServingEngine>> ServingEngine::start(const Server& server,
                                                                    RunCallbacks callbacks) {
  if (server.backend_->virtual_time()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: backend 'sim' runs in virtual time and needs every request up front; use "
        "Server::run",
        server.topology().source));
  }
  std::unique_ptr<ServingEngine> e(new ServingEngine());
  e->server_ = &server;
  e->callbacks_ = std::move(callbacks);
  if (!server.topology().workers.empty()) {
    if (!server.group_) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s lists [[cluster.workers]] but this Server has no process group to reach them "
          "(`muflow serve` sets one; an embedding host calls "
          "Server::set_process_group(cluster::make_cluster_driver(...)))",
          server.topology().source));
    }
    e->group_ = server.group_.get();
    e->ledger_ = std::make_shared<Ledger>();
  }
  HostThreadScope host_thread;
  absl::StatusOr<std::shared_ptr<Incarnation>> inc;
  {
    std::lock_guard<std::mutex> lock(e->group_mu_);
    inc = e->build_on_survivors();
  }
  if (!inc.ok()) return inc.status();
  e->inc_ = std::move(*inc);
  if (e->ledger_) {
    e->ledger_->origin = e->inc_->ctx->t0;
    e->supervisor_ = std::thread([engine = e.get()] { engine->supervise(); });
  }
  return e;
}

absl::StatusOr<std::shared_ptr<ServingEngine::Incarnation>> ServingEngine::build_incarnation() {
  const Server& server = *server_;
  absl::StatusOr<std::unique_ptr<engine::serving::SchedulingPolicy>> policy =
      make_device_policy(server.topology());
  if (!policy.ok()) return policy.status();
  auto inc = std::make_shared<Incarnation>();
  inc->cfg = std::make_unique<caf::actor_system_config>();
  server.backend_->configure_clock(*inc->cfg);
  if (group_ != nullptr) group_->configure(*inc->cfg);
  inc->sys = std::make_unique<caf::actor_system>(*inc->cfg);
  absl::StatusOr<std::shared_ptr<RunContext>> ctx = server.make_context();
  if (!ctx.ok()) return ctx.status();
  inc->ctx = std::move(*ctx);
  inc->ctx->long_lived = true;
  // Across processes the workers build their share before this process spawns anything.
  ProcessLayout* layout = nullptr;
  if (group_ != nullptr) {
    // Counted before open takes them back: one that comes back during open is taken back
    // by the next replacement, never missed.
    inc->returned_before = group_->returned_workers().size();
    absl::StatusOr<ProcessLayout*> opened = group_->open(*inc->sys, inc->ctx);
    if (!opened.ok()) {
      group_->close();
      return opened.status();
    }
    // After open: a worker it found lost (unreachable) is not on this wiring's layout.
    inc->lost_before = group_->lost_workers().size();
    layout = *opened;
    for (int64_t d = 0; d < static_cast<int64_t>(inc->ctx->placement.num_devices); ++d) {
      inc->hosted.push_back(layout->hosts_device(d));
      inc->device_process.push_back(layout->process_of(d));
    }
  }
  build_wiring(*inc->sys, inc->ctx,
               std::shared_ptr<const engine::serving::SchedulingPolicy>(std::move(*policy)),
               layout);
  if (group_ != nullptr) {
    if (absl::Status s = group_->start(); !s.ok()) {
      stop_actors(*inc->ctx);
      inc->sys->await_all_actors_done();
      group_->close();
      return s;
    }
  }
  RunCallbacks cb = callbacks_;
  if (ledger_) {
    // Each request's own (wrapped) on_finish hands its output to the host's run-level one.
    cb.on_finish = nullptr;
    cb.on_token = [this](int64_t id, int32_t token) {
      {
        std::lock_guard<std::mutex> lock(ledger_->mu);
        ++ledger_->tokens;
        if (ledger_->awaiting_first_token) {
          ledger_->recoveries.back().first_token_s = seconds_between(ledger_->origin, Clock::now());
          ledger_->awaiting_first_token = false;
        }
      }
      if (callbacks_.on_token) callbacks_.on_token(id, token);
    };
    if (callbacks_.on_progress) {  // counts over the engine's life, not this wiring's
      cb.on_progress = [this](int64_t finished, int64_t requests, int64_t tokens, double clock_s) {
        int64_t earlier_finished = 0, earlier_tokens = 0;
        {
          std::lock_guard<std::mutex> lock(ledger_->mu);
          earlier_finished = ledger_->earlier_finished;
          earlier_tokens = ledger_->earlier_tokens;
        }
        callbacks_.on_progress(finished + earlier_finished, requests + earlier_finished,
                               tokens + earlier_tokens, clock_s);
      };
    }
  }
  inc->ctx->t0 = inc->sys->clock().now();
  inc->ctx->busy_log = std::make_shared<BusyLog>();
  inc->ctx->actors.coordinator = spawn_coordinator(*inc->sys, inc->ctx, std::move(cb));
  caf::anon_send(inc->ctx->actors.coordinator, start_atom::value);
  return inc;
}

absl::StatusOr<std::shared_ptr<ServingEngine::Incarnation>> ServingEngine::build_on_survivors() {
  size_t lost = group_ != nullptr ? group_->lost_workers().size() : 0;
  const size_t max_tries = server_->topology().workers.size() + 1;
  for (size_t tries = 1;; ++tries) {
    absl::StatusOr<std::shared_ptr<Incarnation>> inc = build_incarnation();
    if (inc.ok() || group_ == nullptr || tries >= max_tries) return inc;
    const std::vector<ProcessGroup::LostWorker> now = group_->lost_workers();
    if (now.size() <= lost) return inc;  // failed for another reason than a lost worker
    spdlog::warn("muflow engine: {} while the wiring was set up; setting it up on the survivors",
                 now.back().description);
    lost = now.size();
  }
}

RequestCallbacks ServingEngine::wrap(int64_t id, std::shared_ptr<const RequestCallbacks> user,
                                     const Incarnation& inc) {
  RequestCallbacks w;
  w.on_token = [ledger = ledger_.get(), user, id](int32_t token) {
    {
      std::lock_guard<std::mutex> lock(ledger->mu);
      if (auto it = ledger->live.find(id); it != ledger->live.end()) it->second.r.on_token(token);
    }
    if (user->on_token) user->on_token(token);
  };
  w.on_finish = [this, user, id, lost_before = inc.lost_before, retired = inc.retired,
                 offset_s = inc.offset_s](const RequestOutput& out, const absl::Status& status) {
    // Ended by a lost worker or by the replacement of its wiring: the next wiring serves it
    // again and its host hears of it then.
    if (!status.ok() && (retired->load() || group_->lost_workers().size() > lost_before)) return;
    RequestOutput merged;
    {
      std::lock_guard<std::mutex> lock(ledger_->mu);
      auto it = ledger_->live.find(id);
      merged = merged_output(it != ledger_->live.end() ? &it->second.r : nullptr, out, offset_s,
                             ledger_->origin);
      if (it != ledger_->live.end()) ledger_->live.erase(it);
      if (status.ok()) {
        ++ledger_->finished;
        if (out.finish_s >= 0) ++ledger_->completed;
        if (out.finish_reason == FinishReason::kRejected) ++ledger_->rejected;
        if (!user->on_finish && callbacks_.keep_outputs) ledger_->undrained[id] = merged;
      }
    }
    if (status.ok() && callbacks_.on_finish) callbacks_.on_finish(merged);
    if (user->on_finish) user->on_finish(merged, status);
  };
  return w;
}

void ServingEngine::supervise() {
  HostThreadScope host_thread;
  for (;;) {
    std::shared_ptr<Incarnation> inc;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopped_ || !failed_.ok()) return;
      inc = inc_;
    }
    std::string why;
    bool down = false;
    {
      // A lost worker's remote handles are stopped by the group (process_layout.hpp); any
      // other actor that stops has failed the engine. Meanwhile a lost worker that answers
      // again is taken back.
      caf::scoped_actor self{*inc->sys, /*hide=*/true};
      self->monitor(inc->ctx->actors.coordinator);
      inc->ctx->actors.for_each_wiring_actor([&](const caf::actor& a) { self->monitor(a); });
      while (!down && group_->returned_workers().size() <= inc->returned_before) {
        self->receive(
            [&](const caf::down_msg& d) {
              why = inc->sys->render(d.reason);
              down = true;
            },
            caf::after(kReturnPoll) >> [] {});
      }
    }
    if (!down) {
      take_back(inc);
      continue;
    }
    if (group_->lost_workers().size() <= inc->lost_before) {
      // Another failure (the requests' on_finish and drain report the coordinator's error):
      // no recovery comes, so nobody waits for one.
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (failed_.ok() && !stopped_) {
          failed_ = absl::InternalError("an actor of the wiring stopped unexpectedly: " + why);
        }
      }
      changed_.notify_all();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopped_) return;
    }
    recover(inc);
  }
}

void ServingEngine::recover(const std::shared_ptr<Incarnation>& old) {
  const std::vector<ProcessGroup::LostWorker> lost = group_->lost_workers();
  RunRecovery r;
  std::vector<std::string> what;
  for (size_t i = old->lost_before; i < lost.size(); ++i) what.push_back(lost[i].description);
  r.lost = absl::StrJoin(what, "; ");
  r.detected_s = seconds_between(ledger_->origin, lost[old->lost_before].detected);
  const std::string what_failed = absl::StrCat("recovering from the loss of ", r.lost);
  replace_wiring(old, std::move(r), what_failed);
}

void ServingEngine::take_back(const std::shared_ptr<Incarnation>& old) {
  const std::vector<ProcessGroup::ReturnedWorker> back = group_->returned_workers();
  RunRecovery r;
  std::vector<std::string> what;
  for (size_t i = old->returned_before; i < back.size(); ++i) what.push_back(back[i].description);
  r.rejoined = absl::StrJoin(what, "; ");
  r.detected_s = seconds_between(ledger_->origin, back[old->returned_before].detected);
  const std::string what_failed = absl::StrCat("taking back ", r.rejoined);
  replace_wiring(old, std::move(r), what_failed);
}

void ServingEngine::replace_wiring(const std::shared_ptr<Incarnation>& old, RunRecovery r,
                                   const std::string& what) {
  // The old wiring stops (no callback of it runs after this), then the group forgets its run
  // and builds the next one on the live workers.
  old->retired->store(true);
  stop_actors(*old->ctx);
  old->sys->await_all_actors_done();
  absl::StatusOr<std::shared_ptr<Incarnation>> next;
  {
    std::lock_guard<std::mutex> lock(group_mu_);
    group_->close();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopped_) return;  // shutdown stops the old wiring (stopped already) and the group
    }
    next = build_on_survivors();
  }
  if (!next.ok()) {
    const absl::Status failure =
        absl::UnavailableError(absl::StrCat(what, ": ", next.status().message()));
    spdlog::error("muflow engine: {}", std::string(failure.message()));
    std::map<int64_t, Ledger::Entry> unfinished;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      failed_ = failure;
    }
    {
      std::lock_guard<std::mutex> lock(ledger_->mu);
      unfinished.swap(ledger_->live);
    }
    changed_.notify_all();
    for (auto& [id, e] : unfinished) {
      if (!e.user->on_finish) continue;
      RequestOutput out;
      out.request_id = id;
      out.prompt = e.r.request.prompt;
      out.prompt_text = e.r.request.prompt_text;
      out.arrival_s = e.r.request.arrival_s;
      out.output = e.r.generated;
      try {
        e.user->on_finish(out, failure);
      } catch (...) {
        // The engine failed already; a throwing callback changes nothing.
      }
    }
    return;
  }
  std::shared_ptr<Incarnation> inc = std::move(*next);
  inc->offset_s = seconds_between(ledger_->origin, inc->ctx->t0);
  r.resumed_s = inc->offset_s;
  if (inc->returned_before > old->returned_before) {
    // The workers the new wiring's open took back, whatever made the engine replace the wiring
    // (a recovery's open also takes back a worker that came back meanwhile).
    const std::vector<ProcessGroup::ReturnedWorker> back = group_->returned_workers();
    std::vector<std::string> what;
    for (size_t i = old->returned_before; i < inc->returned_before && i < back.size(); ++i) {
      what.push_back(back[i].description);
    }
    r.rejoined = absl::StrJoin(what, "; ");
  }
  if (r.lost.empty() && inc->lost_before > old->lost_before) {
    // A worker that came back and was lost again while the next wiring was built (it could
    // not be joined or set up): the record says so, and the wiring is the survivors'.
    const std::vector<ProcessGroup::LostWorker> lost = group_->lost_workers();
    std::vector<std::string> what;
    for (size_t i = old->lost_before; i < inc->lost_before && i < lost.size(); ++i) {
      what.push_back(lost[i].description);
    }
    r.lost = absl::StrJoin(what, "; ");
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Shutdown, if it came meanwhile, stops this wiring (it is the current one).
    const bool readmit = !stopped_;
    inc_ = inc;
    if (readmit) {
      auto sub = std::make_shared<Submission>();
      sub->keep_ids = true;
      std::vector<int64_t> cancels;
      {
        std::lock_guard<std::mutex> ledger_lock(ledger_->mu);
        for (auto& [id, e] : ledger_->live) {
          sub->requests.push_back(readmission(e.r, inc->offset_s));
          sub->callbacks.push_back(wrap(id, e.user, *inc));
          if (e.cancel_requested) cancels.push_back(id);
        }
        r.readmitted_requests = static_cast<int64_t>(ledger_->live.size());
        ledger_->earlier_tokens += std::exchange(ledger_->tokens, 0);
        ledger_->earlier_finished += std::exchange(ledger_->finished, 0);
        ledger_->earlier_completed += std::exchange(ledger_->completed, 0);
        ledger_->earlier_rejected += std::exchange(ledger_->rejected, 0);
        ledger_->awaiting_first_token = true;
        ledger_->recoveries.push_back(r);
      }
      spdlog::warn("muflow engine: {}; re-admitting {} unfinished requests on the new wiring",
                   r.lost.empty() ? r.rejoined : r.lost, r.readmitted_requests);
      const caf::actor& coordinator = inc->ctx->actors.coordinator;
      caf::anon_send(coordinator, submit_atom::value, std::move(sub));
      for (int64_t id : cancels) caf::anon_send(coordinator, cancel_atom::value, id);
    }
  }
  changed_.notify_all();
}

void ServingEngine::add_earlier(engine::serving::RunMetrics& m) {
  double offset_s = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    offset_s = inc_->offset_s;
  }
  std::lock_guard<std::mutex> lock(ledger_->mu);
  if (ledger_->recoveries.empty()) return;
  m.num_requests += ledger_->earlier_finished;
  m.num_completed_requests += ledger_->earlier_completed;
  m.num_rejected_requests += ledger_->earlier_rejected;
  m.num_output_tokens += ledger_->earlier_tokens;
  m.duration_s += offset_s;
  m.output_tokens_per_s =
      m.duration_s > 0 ? static_cast<double>(m.num_output_tokens) / m.duration_s : 0.0;
}

ServingEngine::~ServingEngine() { (void)shutdown(); }

absl::StatusOr<int64_t> ServingEngine::submit(engine::serving::Request request,
                                              RequestCallbacks callbacks) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopped_) return absl::FailedPreconditionError("the engine was shut down");
  if (!failed_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("the engine failed: ", failed_.message()));
  }
  request.id = next_id_;
  // The engine sets the arrival time itself: validate the rest (Server's 10^7 s cap on
  // arrival times is for batch runs; an engine may serve for longer than 116 days).
  request.arrival_s = 0.0;
  if (absl::Status s = server_->validate_request(request); !s.ok()) return s;
  const Incarnation& inc = *inc_;
  request.arrival_s = std::max(0.0, inc.ctx->seconds_since_start(inc.sys->clock().now()));
  ++next_id_;
  auto submission = std::make_shared<Submission>();
  if (ledger_) {
    auto user = std::make_shared<const RequestCallbacks>(std::move(callbacks));
    {
      std::lock_guard<std::mutex> ledger_lock(ledger_->mu);
      Ledger::Entry& e = ledger_->live[request.id];
      e.r.request = request;
      e.r.request.arrival_s += inc.offset_s;
      e.user = user;
    }
    callbacks = wrap(request.id, std::move(user), inc);
    submission->keep_ids = true;
  }
  submission->requests.push_back(std::move(request));
  submission->callbacks.push_back(std::move(callbacks));
  // Sent under the lock: the coordinator receives ids in the order they were assigned.
  caf::anon_send(inc.ctx->actors.coordinator, submit_atom::value, std::move(submission));
  return next_id_ - 1;
}

void ServingEngine::cancel(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopped_) return;
  if (ledger_) {  // a recovery under way re-admits it cancelled
    std::lock_guard<std::mutex> ledger_lock(ledger_->mu);
    if (auto it = ledger_->live.find(id); it != ledger_->live.end()) {
      it->second.cancel_requested = true;
    }
  }
  caf::anon_send(inc_->ctx->actors.coordinator, cancel_atom::value, id);
}

absl::StatusOr<std::shared_ptr<ServingEngine::Incarnation>> ServingEngine::current_wiring() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopped_) return absl::FailedPreconditionError("the engine was shut down");
  if (!failed_.ok()) return failed_;
  return inc_;
}

absl::StatusOr<RunOutcome> ServingEngine::drain() {
  HostThreadScope host_thread;
  for (;;) {
    absl::StatusOr<std::shared_ptr<Incarnation>> current = current_wiring();
    if (!current.ok()) return current.status();
    const std::shared_ptr<Incarnation> inc = std::move(*current);
    RunOutcome outcome;
    {
      caf::actor_system& sys = *inc->sys;
      const caf::actor& coordinator = inc->ctx->actors.coordinator;
      caf::scoped_actor self{sys, /*hide=*/true};
      self->monitor(coordinator);
      self->send(coordinator, drain_atom::value, caf::actor_cast<caf::actor>(self));
      bool received = false;
      self->receive_while([&] { return !received; })(
          [&](const RunOutcomePtr& result) {
            outcome = *result;
            received = true;
          },
          [&](const caf::down_msg& down) {
            outcome.status = absl::InternalError("the coordinator stopped unexpectedly: " +
                                                 sys.render(down.reason));
            received = true;
          });
    }
    if (!outcome.status.ok()) {
      if (await_replacement(inc)) continue;
      return outcome.status;
    }
    if (ledger_) {
      {
        std::lock_guard<std::mutex> lock(ledger_->mu);
        outcome.outputs.clear();
        for (auto& [id, o] : ledger_->undrained) outcome.outputs.push_back(std::move(o));
        ledger_->undrained.clear();
        outcome.recoveries = ledger_->recoveries;
      }
      add_earlier(outcome.metrics);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    last_metrics_ = outcome.metrics;
    return outcome;
  }
}

template <class T, class Ask>
absl::StatusOr<T> ServingEngine::ask_current(Ask&& ask) {
  HostThreadScope host_thread;
  for (;;) {
    absl::StatusOr<std::shared_ptr<Incarnation>> current = current_wiring();
    if (!current.ok()) return current.status();
    const std::shared_ptr<Incarnation> inc = std::move(*current);
    absl::StatusOr<T> answer = ask(*inc);
    if (!answer.ok() && await_replacement(inc)) continue;
    // A recovery came meanwhile: the answer could mix two wirings' figures.
    if (answer.ok() && replaced(inc)) continue;
    return answer;
  }
}

absl::StatusOr<int64_t> ServingEngine::kv_cache_bytes() {
  absl::StatusOr<StageLoad> load =
      ask_current<StageLoad>([this](const Incarnation& inc) { return stage_load(inc); });
  if (!load.ok()) return load.status();
  return load->kv_bytes;
}

absl::StatusOr<EngineStats> ServingEngine::stats() {
  return ask_current<EngineStats>([this](const Incarnation& inc) { return stats_of(inc); });
}

absl::StatusOr<StageLoad> ServingEngine::stage_load(const Incarnation& inc) {
  std::function<bool(int64_t)> hosted;
  if (!inc.hosted.empty()) {
    hosted = [&inc](int64_t d) {
      return d >= 0 && d < static_cast<int64_t>(inc.hosted.size()) &&
             inc.hosted[static_cast<size_t>(d)];
    };
  }
  absl::StatusOr<StageLoad> load = probe_stages(*inc.sys, *inc.ctx, hosted, kAnswerTimeout);
  if (!load.ok() || group_ == nullptr) return load;
  std::lock_guard<std::mutex> lock(group_mu_);
  absl::StatusOr<StageLoad> workers = group_->stage_load(kAnswerTimeout);
  if (!workers.ok()) return workers.status();
  *load += *workers;
  return load;
}

absl::StatusOr<EngineStats> ServingEngine::stats_of(const Incarnation& inc) {
  EngineStats stats;
  {
    caf::scoped_actor self{*inc.sys, /*hide=*/true};
    absl::Status status;
    self->request(inc.ctx->actors.coordinator, kAnswerTimeout, stats_atom::value)
        .receive([&](const EngineStatsPtr& s) { stats = *s; },
                 [&](const caf::error& err) {
                   status = absl::InternalError("the coordinator did not report its state: " +
                                                inc.sys->render(err));
                 });
    if (!status.ok()) return status;
  }
  absl::StatusOr<StageLoad> load = stage_load(inc);
  if (!load.ok()) return load.status();
  stats.queued_attention_tokens = load->queued_attention_tokens;
  stats.queued_expert_tokens = load->queued_expert_tokens;
  stats.queued_sampler_tokens = load->queued_sampler_tokens;
  if (ledger_) {
    {
      std::lock_guard<std::mutex> lock(ledger_->mu);
      stats.num_finished += ledger_->earlier_finished;
      stats.recoveries = ledger_->recoveries;
    }
    stats.device_process = inc.device_process;
    add_earlier(stats.metrics);
  }
  return stats;
}

bool ServingEngine::await_replacement(const std::shared_ptr<Incarnation>& inc) {
  if (!ledger_ || (!inc->retired->load() && group_->lost_workers().size() <= inc->lost_before)) {
    return false;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return stopped_ || !failed_.ok() || inc_ != inc; });
  return inc_ != inc && !stopped_;
}

bool ServingEngine::replaced(const std::shared_ptr<Incarnation>& inc) {
  std::lock_guard<std::mutex> lock(mutex_);
  return inc_ != inc && !stopped_ && failed_.ok();
}

absl::Status ServingEngine::shutdown() {
  HostThreadScope host_thread;
  std::shared_ptr<Incarnation> inc;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return absl::OkStatus();
    stopped_ = true;
    inc = inc_;
  }
  if (!inc) return absl::OkStatus();  // start failed: nothing was spawned
  changed_.notify_all();
  // The supervisor watches these actors: stopping them wakes it (a recovery under way ends
  // first, and makes its wiring the current one).
  stop_actors(*inc->ctx);
  if (supervisor_.joinable()) supervisor_.join();
  absl::Status failed;
  // A wiring a recovery replaced is destroyed outside the lock (its system's destructor may
  // wait for another host thread, which may be waiting for the lock).
  std::shared_ptr<Incarnation> replaced_wiring = std::move(inc);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    inc = inc_;
    failed = failed_;
  }
  replaced_wiring.reset();
  stop_actors(*inc->ctx);
  inc->sys->await_all_actors_done();  // nothing reads ctx or records trace events after this
  if (group_ != nullptr) {
    std::lock_guard<std::mutex> lock(group_mu_);
    if (inc->ctx->trace && failed.ok()) {
      if (absl::Status s = group_->finish(*inc->ctx); !s.ok()) {
        spdlog::warn("muflow engine: the trace lacks a worker's devices: {}",
                     std::string(s.message()));
      }
    }
    group_->close();
  }
  RunOutcome outcome;  // the trace's metadata: the metrics of the last drain
  {
    std::lock_guard<std::mutex> lock(mutex_);
    outcome.metrics = last_metrics_;
  }
  return server_->finish_run(*inc->ctx, outcome);
}

}  // namespace muflow::actors
