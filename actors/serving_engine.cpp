#include "actors/serving_engine.hpp"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "actors/graph_builder.hpp"
#include "actors/messages.hpp"

namespace muflow::actors {

absl::StatusOr<std::unique_ptr<ServingEngine>> ServingEngine::start(const Server& server,
                                                                    RunCallbacks callbacks) {
  if (server.backend_->virtual_time()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: backend 'sim' runs in virtual time and needs every request up front; use "
        "Server::run",
        server.topology().source));
  }
  if (!server.topology().workers.empty()) {
    return absl::UnimplementedError(absl::StrFormat(
        "%s: [[cluster.workers]]: a long-lived engine runs in one process so far; batch runs "
        "(Server::run, `muflow run`) span workers",
        server.topology().source));
  }
  absl::StatusOr<std::unique_ptr<engine::serving::SchedulingPolicy>> policy =
      engine::serving::make_scheduling_policy(server.topology().scheduler.policy,
                                              server.topology().scheduler.defrag_lookahead,
                                              server.topology().scheduler.defrag_decay);
  if (!policy.ok()) return policy.status();
  absl::StatusOr<std::shared_ptr<RunContext>> ctx = server.make_context();
  if (!ctx.ok()) return ctx.status();

  std::unique_ptr<ServingEngine> e(new ServingEngine());
  e->server_ = &server;
  e->ctx_ = *ctx;
  e->ctx_->long_lived = true;
  e->cfg_ = std::make_unique<caf::actor_system_config>();
  server.backend_->configure_clock(*e->cfg_);
  e->sys_ = std::make_unique<caf::actor_system>(*e->cfg_);
  build_wiring(*e->sys_, e->ctx_,
               std::shared_ptr<const engine::serving::SchedulingPolicy>(std::move(*policy)));
  e->ctx_->t0 = e->sys_->clock().now();
  e->ctx_->actors.coordinator = spawn_coordinator(*e->sys_, e->ctx_, std::move(callbacks));
  caf::anon_send(e->ctx_->actors.coordinator, start_atom::value);
  return e;
}

ServingEngine::~ServingEngine() { (void)shutdown(); }

absl::StatusOr<int64_t> ServingEngine::submit(engine::serving::Request request,
                                              RequestCallbacks callbacks) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopped_) return absl::FailedPreconditionError("the engine was shut down");
  request.id = next_id_;
  // The engine sets the arrival time itself: validate the rest (Server's 10^7 s cap on
  // arrival times is for batch runs; an engine may serve for longer than 116 days).
  request.arrival_s = 0.0;
  if (absl::Status s = server_->validate_request(request); !s.ok()) return s;
  request.arrival_s = std::max(0.0, ctx_->seconds_since_start(sys_->clock().now()));
  ++next_id_;
  auto submission = std::make_shared<Submission>();
  submission->requests.push_back(std::move(request));
  submission->callbacks.push_back(std::move(callbacks));
  // Sent under the lock: the coordinator receives ids in the order they were assigned.
  caf::anon_send(ctx_->actors.coordinator, submit_atom::value, std::move(submission));
  return next_id_ - 1;
}

void ServingEngine::cancel(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopped_) return;
  caf::anon_send(ctx_->actors.coordinator, cancel_atom::value, id);
}

absl::StatusOr<RunOutcome> ServingEngine::drain() {
  caf::actor coordinator;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return absl::FailedPreconditionError("the engine was shut down");
    coordinator = ctx_->actors.coordinator;
  }
  caf::scoped_actor self{*sys_};
  self->monitor(coordinator);
  self->send(coordinator, drain_atom::value, caf::actor_cast<caf::actor>(self));
  RunOutcome outcome;
  bool received = false;
  self->receive_while([&] { return !received; })(
      [&](const RunOutcomePtr& result) {
        outcome = *result;
        received = true;
      },
      [&](const caf::down_msg& down) {
        outcome.status = absl::InternalError("the coordinator stopped unexpectedly: " +
                                             sys_->render(down.reason));
        received = true;
      });
  if (!outcome.status.ok()) return outcome.status;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    last_metrics_ = outcome.metrics;
  }
  return outcome;
}

absl::StatusOr<int64_t> ServingEngine::kv_cache_bytes() {
  std::vector<caf::actor> stages;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return absl::FailedPreconditionError("the engine was shut down");
    for (const auto& block : ctx_->actors.attention) {
      stages.insert(stages.end(), block.begin(), block.end());
    }
  }
  caf::scoped_actor self{*sys_};
  int64_t total = 0;
  absl::Status status;
  for (const caf::actor& stage : stages) {
    self->request(stage, std::chrono::seconds(10), kv_atom::value)
        .receive([&](int64_t bytes) { total += std::max<int64_t>(0, bytes); },
                 [&](const caf::error& err) {
                   status = absl::InternalError(
                       "an attention stage did not report its KV "
                       "cache: " +
                       sys_->render(err));
                 });
    if (!status.ok()) return status;
  }
  return total;
}

absl::StatusOr<EngineStats> ServingEngine::stats() {
  caf::actor coordinator;
  std::vector<std::pair<caf::actor, engine::dataflow::StageKind>> stages;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return absl::FailedPreconditionError("the engine was shut down");
    coordinator = ctx_->actors.coordinator;
    for (const auto& block : ctx_->actors.attention) {
      for (const caf::actor& a : block)
        stages.emplace_back(a, engine::dataflow::StageKind::kAttention);
    }
    for (const auto& block : ctx_->actors.experts) {
      for (const caf::actor& a : block)
        stages.emplace_back(a, engine::dataflow::StageKind::kExpert);
    }
    for (const caf::actor& a : ctx_->actors.samplers) {
      stages.emplace_back(a, engine::dataflow::StageKind::kSampler);
    }
  }
  caf::scoped_actor self{*sys_};
  EngineStats stats;
  absl::Status status;
  auto on_error = [&](const caf::error& err) {
    status = absl::InternalError("an actor did not report its state: " + sys_->render(err));
  };
  self->request(coordinator, std::chrono::seconds(10), stats_atom::value)
      .receive([&](const EngineStatsPtr& s) { stats = *s; }, on_error);
  if (!status.ok()) return status;
  for (const auto& entry : stages) {
    // Not a structured binding: clang before 16 cannot capture one in the lambda below.
    const caf::actor& stage = entry.first;
    const engine::dataflow::StageKind kind = entry.second;
    if (!stage) continue;
    self->request(stage, std::chrono::seconds(10), depth_atom::value)
        .receive(
            [&](int64_t depth) {
              int64_t& sum =
                  kind == engine::dataflow::StageKind::kAttention ? stats.queued_attention_tokens
                  : kind == engine::dataflow::StageKind::kExpert  ? stats.queued_expert_tokens
                                                                  : stats.queued_sampler_tokens;
              sum += std::max<int64_t>(0, depth);
            },
            on_error);
    if (!status.ok()) return status;
  }
  return stats;
}

absl::Status ServingEngine::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return absl::OkStatus();
    stopped_ = true;
  }
  auto stop = [](const caf::actor& a) { caf::anon_send_exit(a, caf::exit_reason::user_shutdown); };
  ctx_->actors.for_each_wiring_actor(stop);
  if (ctx_->actors.coordinator) stop(ctx_->actors.coordinator);
  sys_->await_all_actors_done();  // nothing reads ctx or records trace events after this
  RunOutcome outcome;             // the trace's metadata: the metrics of the last drain
  outcome.metrics = last_metrics_;
  return server_->finish_run(*ctx_, outcome);
}

}  // namespace muflow::actors
