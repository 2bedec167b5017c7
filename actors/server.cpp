#include "actors/server.hpp"

#include <algorithm>
#include <caf/scheduler/test_coordinator.hpp>
#include <chrono>
#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "actors/graph_builder.hpp"
#include "actors/messages.hpp"
#include "actors/placement_setup.hpp"
#include "actors/wirings/device_policy.hpp"
#include "actors/wirings/registry.hpp"
#include "engine/planning/placement.hpp"
#include "engine/serving/kv_admission.hpp"
#include "engine/serving/workload.hpp"
#include "kernels/assert.hpp"
#include "spdlog/spdlog.h"

namespace muflow::actors {
namespace {
constexpr double kMaxArrivalS = 1e7;  // ~116 days: keeps timer arithmetic far from overflow
}  // namespace

namespace {

// The folder's tokenizer (text prompts need it, on the sim backend too), or null when the
// model has none. Errors: a tokenizer file that exists but does not load.
absl::StatusOr<std::unique_ptr<engine::model::Tokenizer>> load_tokenizer(
    const engine::topology::Topology& t) {
  if (t.model.path.empty()) return nullptr;
  absl::StatusOr<std::unique_ptr<engine::model::Tokenizer>> tok =
      engine::model::Tokenizer::load_from_model_dir(t.model.path);
  if (tok.ok()) return std::move(*tok);
  if (absl::IsNotFound(tok.status())) return nullptr;
  return tok.status();
}

// The placement runs use: the topology's, with planned ones solved (ExFlow affinity, Aurora
// capability) where the wiring accepts them.
absl::StatusOr<engine::planning::Placement> plan_placement(
    const engine::topology::Topology& topology, const Backend& backend, const Wiring& wiring) {
  absl::StatusOr<engine::planning::Placement> placement = engine::planning::make_placement(
      topology, backend.config().num_experts, wiring.traits().disaggregated_attention);
  if (!placement.ok()) return placement.status();
  if (topology.placement == "affinity") {
    if (absl::Status s = apply_affinity_placement(topology, backend.config(), &*placement);
        !s.ok()) {
      return s;
    }
  }
  if (topology.placement == "capability") {
    if (absl::Status s = apply_capability_placement(topology, backend.config(), backend.sim(),
                                                    backend.precision(), &*placement);
        !s.ok()) {
      return s;
    }
  }
  if ((topology.expert_replicas > 0 || !topology.replica_experts.empty()) &&
      !wiring.traits().expert_replicas) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: key '%s' applies to wiring %s, got \"%s\"", topology.source,
        topology.replica_experts.empty() ? "placement.replicas" : "placement.replica_experts",
        wirings_with([](const WiringTraits& t) { return t.expert_replicas; }), topology.wiring));
  }
  return placement;
}

}  // namespace

// load the model (the backend) → plan the placement → prepare the wiring.
absl::StatusOr<std::unique_ptr<Server>> Server::create(engine::topology::Topology topology) {
  absl::StatusOr<const Wiring*> wiring = find_wiring(topology.wiring);
  if (!wiring.ok()) {
    return absl::Status(wiring.status().code(),
                        absl::StrCat(topology.source, ": ", wiring.status().message()));
  }
  if (topology.scheduler.max_batch_requests < 1 || topology.scheduler.max_prefill_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: keys 'scheduler.max_batch_requests' and 'scheduler.max_prefill_tokens' must be >= 1 "
        "(got %d and %d)",
        topology.source, topology.scheduler.max_batch_requests,
        topology.scheduler.max_prefill_tokens));
  }
  if (absl::StatusOr<std::unique_ptr<engine::serving::SchedulingPolicy>> pol =
          make_device_policy(topology);
      !pol.ok()) {
    return pol.status();
  }
  std::unique_ptr<Server> server(new Server());
  absl::StatusOr<std::unique_ptr<Backend>> backend = make_backend(topology);
  if (!backend.ok()) return backend.status();
  server->backend_ = std::move(*backend);
  absl::StatusOr<std::unique_ptr<engine::model::Tokenizer>> tokenizer = load_tokenizer(topology);
  if (!tokenizer.ok()) return tokenizer.status();
  server->tokenizer_ = std::move(*tokenizer);
  absl::StatusOr<engine::planning::Placement> placement =
      plan_placement(topology, *server->backend_, **wiring);
  if (!placement.ok()) return placement.status();
  server->placement_ = std::move(*placement);
  const Backend& be = *server->backend_;
  WiringSetup setup{topology, be.config(), server->placement_};
  setup.sim = be.sim();
  setup.precision = be.precision();
  setup.weight_bytes = topology.model.dtype == "bf16" ? 2 : 4;
  setup.weights = be.weights();
  setup.model = be.cpu_model();
  setup.rate_kind = be.rate_kind();
  absl::StatusOr<std::shared_ptr<const PreparedWiring>> prepared = (*wiring)->prepare(setup);
  if (!prepared.ok()) return prepared.status();
  server->wiring_ = std::move(*prepared);
  // Everything that needs the loaded weights has its prepared copy now (CpuModel, MoEShard's
  // shards): hold the model once.
  server->backend_->release_weights();
  server->topology_ = std::move(topology);
  return server;
}

absl::StatusOr<std::vector<engine::serving::Request>> Server::make_workload() const {
  engine::serving::EncodeFn encode;
  if (tokenizer_) {
    encode = [this](const std::string& text) { return tokenizer_->encode(text, true); };
  }
  return engine::serving::make_requests(topology_.workload, config().vocab_size, encode);
}

absl::StatusOr<engine::serving::RequestSourcePtr> Server::make_workload_source() const {
  engine::serving::EncodeFn encode;
  if (tokenizer_) {
    encode = [this](const std::string& text) { return tokenizer_->encode(text, true); };
  }
  return engine::serving::make_request_source(topology_.workload, config().vocab_size, encode);
}

absl::Status Server::validate(const std::vector<engine::serving::Request>& requests) const {
  for (size_t i = 0; i < requests.size(); ++i) {
    const engine::serving::Request& r = requests[i];
    if (r.id != static_cast<int64_t>(i)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("request at index %d has id %d; ids must be 0..n-1 in order", i, r.id));
    }
    if (absl::Status s = validate_request(r); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Server::validate_request(const engine::serving::Request& r) const {
  const engine::model::ModelConfig& c = config();
  if (r.prompt.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("request %d: empty prompt", r.id));
  }
  for (size_t j = 0; j < r.prompt.size(); ++j) {
    if (r.prompt[j] < 0 || r.prompt[j] >= c.vocab_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "request %d: prompt token %d at index %d is outside the vocabulary [0, %d)", r.id,
          r.prompt[j], j, c.vocab_size));
    }
  }
  if (!std::isfinite(r.arrival_s) || r.arrival_s < 0 || r.arrival_s > kMaxArrivalS) {
    return absl::InvalidArgumentError(
        absl::StrFormat("request %d: arrival time %g s; expected a finite time in [0, %g] s", r.id,
                        r.arrival_s, kMaxArrivalS));
  }
  if (backend_->virtual_time() && r.return_prompt_logits) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "request %d: prompt logits are not available on backend 'sim' (no math)", r.id));
  }
  if (r.max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("request %d: max_new_tokens must be >= 1", r.id));
  }
  if (static_cast<int64_t>(r.prompt.size()) >= c.max_position_embeddings) {
    return absl::InvalidArgumentError(
        absl::StrFormat("request %d: prompt of %d tokens does not fit max_position_embeddings = %d",
                        r.id, r.prompt.size(), c.max_position_embeddings));
  }
  if (r.sampling) {
    if (!std::isfinite(r.sampling->temperature) || r.sampling->temperature < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("request %d: temperature %g; expected a finite value >= 0", r.id,
                          r.sampling->temperature));
    }
    if (!(r.sampling->top_p > 0 && r.sampling->top_p <= 1)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "request %d: top_p %g; expected a value in (0, 1]", r.id, r.sampling->top_p));
    }
  }
  return absl::OkStatus();
}

namespace {

// Discrete-event loop of the testing scheduler: run every ready actor, then jump the virtual
// clock to the next delayed message; stops when nothing is left (TOOLCHAIN.md). `between`
// (optional) runs after each step; when it returns true (it sent messages) the ready actors
// run again before the clock moves.
void run_virtual_time(caf::actor_system& sys, const std::function<bool()>& between = {}) {
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  for (;;) {
    sched.run();
    if (between && between()) continue;
    if (!sched.trigger_timeout()) break;
  }
}

// How often a cpu run's host thread polls RunCallbacks::stop_requested (real time).
constexpr std::chrono::milliseconds kStopPollInterval{50};

}  // namespace

std::vector<std::shared_ptr<engine::exec::Executor>> Server::make_executors() const {
  return backend_->make_executors(*wiring_);
}

absl::StatusOr<std::shared_ptr<RunContext>> Server::make_context(
    const transport::Channel* share_links_with, bool keep_trace) const {
  auto ctx = std::make_shared<RunContext>();
  ctx->model = backend_->cpu_model();
  ctx->config = config();
  ctx->virtual_time = backend_->virtual_time();
  if (const SimSetup* sim = backend_->sim()) ctx->step_overhead_s = sim->step_overhead_s;
  ctx->executors = backend_->make_executors(*wiring_);
  absl::StatusOr<std::shared_ptr<transport::Channel>> channel =
      backend_->make_channel(share_links_with);
  if (!channel.ok()) return channel.status();
  ctx->channel = std::move(*channel);
  ctx->activation_bytes = topology_.network.activation_bytes;
  ctx->topology = topology_;
  ctx->placement = placement_;
  if (!topology_.trace_file.empty() || keep_trace) {
    ctx->trace = std::make_shared<engine::trace::TraceRecorder>(trace_max_events_);
  }
  if (!topology_.routing_record_file.empty()) {
    ctx->routing = std::make_shared<engine::routing::RoutingRecorder>();
  }
  // KV-cache capacity per DP rank for admission (the backend's memory model).
  const int64_t elem_bytes = topology_.model.dtype == "bf16" ? 2 : 4;
  ctx->kv_bytes_per_token = engine::serving::kv_bytes_per_token(config(), elem_bytes);
  for (int64_t d : ctx->placement.rank_device) {
    ctx->kv_capacity_bytes.push_back(
        backend_->kv_capacity_bytes(d, static_cast<int64_t>(ctx->placement.experts_on(d).size())));
  }
  ctx->num_ranks = static_cast<int64_t>(ctx->placement.rank_device.size());
  absl::StatusOr<std::shared_ptr<const WiringRun>> run = wiring_->start_run(*ctx);
  if (!run.ok()) return run.status();
  ctx->wiring = std::move(*run);
  return ctx;
}

absl::Status Server::finish_run(const RunContext& ctx, const RunOutcome& outcome) const {
  if (ctx.routing) {
    if (absl::Status s = ctx.routing->write_csv(topology_.routing_record_file); !s.ok()) return s;
  }
  if (ctx.trace) {
    ctx.trace->set_other_data("wiring", topology_.wiring);
    ctx.trace->set_other_data("topology", topology_.source);
    ctx.trace->set_other_data("metrics", engine::serving::to_json(outcome.metrics));
    ctx.trace->set_other_data("num_devices", ctx.placement.num_devices);
    if (const auto m = backend_->cpu_model()) {  // cpu: what the GEMMs computed in (#16)
      ctx.trace->set_other_data("weights_dtype", std::string(m->weights_dtype()));
      ctx.trace->set_other_data("compute_dtype", std::string(m->compute_dtype()));
      ctx.trace->set_other_data("cpu_native_bf16", kernels::cpu::cpu_has_native_bf16());
      ctx.trace->set_other_data("gemm_kernel", std::string(m->gemm_kernel()));
      ctx.trace->set_other_data("threads_per_device", backend_->gemm_threads_per_device());
    }
    ctx.trace->set_other_data("num_layers", config().num_layers);
    ctx.trace->set_other_data("num_experts", config().num_experts);
    ctx.trace->set_other_data("expert_device", ctx.placement.expert_device);
    if (outcome.stopped) ctx.trace->set_other_data("stopped_early", true);
    if (!ctx.placement.block_expert_device.empty()) {
      ctx.trace->set_other_data("block_expert_device", ctx.placement.block_expert_device);
    }
    if (!topology_.trace_file.empty()) {
      if (absl::Status s = ctx.trace->write_json(topology_.trace_file); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RunOutcome>> Server::run_together(
    const std::vector<Server*>& servers, std::vector<SourceSubmissionPtr> sources,
    std::vector<RunCallbacks> callbacks, std::chrono::steady_clock::time_point* started) {
  const size_t n = servers.size();
  MUFLOW_ASSERT(n >= 1 && sources.size() == n && callbacks.size() == n,
                "run_together: one request source and callback set per server");
  const Server& first = *servers.front();
  const bool sim = first.backend_->virtual_time();
  for (const Server* s : servers) {
    if (s->topology_.workers.empty()) continue;
    if (n > 1) {
      return absl::UnimplementedError(absl::StrFormat(
          "%s: [[cluster.workers]]: colocated models run in one process", s->topology_.source));
    }
    if (!s->group_) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s lists [[cluster.workers]] but this Server has no process group to reach them "
          "(the muflow CLI sets one; an embedding host calls "
          "Server::set_process_group(cluster::make_cluster_driver(...)))",
          s->topology_.source));
    }
  }
  caf::actor_system_config cfg;
  first.backend_->configure_clock(cfg);  // sim: the loop below drives the virtual clock
  ProcessGroup* group = first.topology_.workers.empty() ? nullptr : first.group_.get();
  if (group != nullptr) group->configure(cfg);
  caf::actor_system sys{cfg};

  // Everything that can fail comes before the first actor is spawned (an actor system with
  // live actors would wait for them forever on an early return).
  std::vector<std::shared_ptr<RunContext>> ctxs;
  for (size_t i = 0; i < n; ++i) {
    // Colocated runs share the devices' links (one big switch on sim: the first topology's).
    absl::StatusOr<std::shared_ptr<RunContext>> ctx = servers[i]->make_context(
        i > 0 ? ctxs.front()->channel.get() : nullptr, servers[i]->keep_trace_);
    if (!ctx.ok()) return ctx.status();
    ctxs.push_back(*ctx);
  }
  absl::StatusOr<std::unique_ptr<engine::serving::SchedulingPolicy>> policy =
      make_device_policy(first.topology_);
  if (!policy.ok()) return policy.status();
  // A run across processes (#18): the workers build their share before this process spawns
  // anything; `close` runs on every way out from here.
  ProcessLayout* layout = nullptr;
  struct CloseGroup {
    ProcessGroup* group = nullptr;
    ~CloseGroup() {
      if (group != nullptr) group->close();
    }
  } close_group;
  if (group != nullptr) {
    close_group.group = group;
    absl::StatusOr<ProcessLayout*> opened = group->open(sys, ctxs.front());
    if (!opened.ok()) return opened.status();
    layout = *opened;
  }
  std::vector<std::vector<DeviceStage>> local;
  for (const auto& ctx : ctxs) build_stages(sys, ctx, local, layout);
  spawn_devices(sys, ctxs, std::move(local),
                std::shared_ptr<const engine::serving::SchedulingPolicy>(std::move(*policy)),
                layout);
  std::vector<std::function<bool()>> stop_requested;  // polled here; the coordinators ignore it
  for (const RunCallbacks& cb : callbacks) {
    if (cb.stop_requested) stop_requested.push_back(cb.stop_requested);
  }
  if (group != nullptr) {
    if (absl::Status s = group->start(); !s.ok()) {
      for (const auto& ctx : ctxs) {
        ctx->actors.for_each_wiring_actor(
            [](const caf::actor& a) { caf::anon_send_exit(a, caf::exit_reason::user_shutdown); });
      }
      return s;
    }
  }
  const auto t0 = sys.clock().now();
  if (started != nullptr) *started = t0;
  for (size_t i = 0; i < n; ++i) {
    ctxs[i]->t0 = t0;
    ctxs[i]->busy_log = std::make_shared<BusyLog>();
    ctxs[i]->actors.coordinator = spawn_coordinator(sys, ctxs[i], std::move(callbacks[i]));
  }

  std::vector<RunOutcome> outcomes(n);
  bool stopping = false;
  {
    std::vector<std::unique_ptr<caf::scoped_actor>> selves;
    // A host's stop: cancel every request of every model (finished ones ignore it), once.
    // True when it sent the cancels.
    auto poll_stop = [&]() -> bool {
      if (stopping) return false;
      if (!std::any_of(stop_requested.begin(), stop_requested.end(),
                       [](const std::function<bool()>& f) { return f(); })) {
        return false;
      }
      stopping = true;
      for (size_t i = 0; i < n; ++i) {
        (*selves[i])->send(ctxs[i]->actors.coordinator, cancel_all_atom::value);
      }
      return true;
    };
    for (size_t i = 0; i < n; ++i) {
      selves.push_back(std::make_unique<caf::scoped_actor>(sys));
      caf::scoped_actor& self = *selves.back();
      // The batch run is a client of the coordinator: start, hand it the request source (it
      // takes each request as the clock reaches its arrival), drain.
      const caf::actor& coordinator = ctxs[i]->actors.coordinator;
      self->monitor(coordinator);
      self->send(coordinator, start_atom::value);
      self->send(coordinator, submit_atom::value, std::move(sources[i]));
      self->send(coordinator, drain_atom::value, caf::actor_cast<caf::actor>(self));
    }
    if (sim) run_virtual_time(sys, poll_stop);
    for (size_t i = 0; i < n; ++i) {
      caf::scoped_actor& self = *selves[i];
      RunOutcome& outcome = outcomes[i];
      bool received = false;
      auto on_outcome = [&](const RunOutcomePtr& result) {
        outcome = std::move(*result);
        received = true;
      };
      auto on_down = [&](const caf::down_msg& down) {
        outcome.status =
            absl::InternalError("the coordinator stopped unexpectedly: " + sys.render(down.reason));
        received = true;
      };
      if (sim) {
        // Everything has run; the outcome (or the coordinator's death) is already queued.
        self->receive(
            on_outcome, on_down, caf::after(std::chrono::seconds(0)) >> [&] {
              outcome.status = absl::InternalError(
                  "the simulation ran out of events before every request finished");
              received = true;
            });
      } else {
        if (stop_requested.empty()) {
          self->receive_while([&] { return !received; })(on_outcome, on_down);
        } else {
          self->receive_while([&] { return !received; })(
              on_outcome, on_down, caf::after(kStopPollInterval) >> [&] { poll_stop(); });
        }
      }
    }
  }
  auto stop = [](const caf::actor& a) { caf::anon_send_exit(a, caf::exit_reason::user_shutdown); };
  for (const auto& ctx : ctxs) {
    ctx->actors.for_each_wiring_actor(stop);
    if (ctx->actors.coordinator) stop(ctx->actors.coordinator);
  }
  if (sim) run_virtual_time(sys);
  sys.await_all_actors_done();  // nothing reads ctx or records trace events after this
  for (size_t i = 0; i < n; ++i) {
    if (!outcomes[i].status.ok()) return outcomes[i].status;
  }
  // A run across processes: the workers' trace events join this process's (one trace).
  if (group != nullptr) {
    if (absl::Status s = group->finish(*ctxs.front()); !s.ok()) {
      spdlog::warn("muflow: {} (the trace lacks that worker's devices)", std::string(s.message()));
    }
  }
  for (size_t i = 0; i < n; ++i) {
    outcomes[i].stopped = stopping;
    if (ctxs[i]->trace) {
      outcomes[i].num_trace_dropped_events = ctxs[i]->trace->num_dropped();
      outcomes[i].trace_warning = ctxs[i]->trace->dropped_warning();
    }
    if (absl::Status s = servers[i]->finish_run(*ctxs[i], outcomes[i]); !s.ok()) return s;
    if (servers[i]->keep_trace_) outcomes[i].trace = ctxs[i]->trace;
  }
  return outcomes;
}

absl::StatusOr<std::shared_ptr<RunContext>> Server::host_share(caf::actor_system& sys,
                                                               ProcessLayout& layout,
                                                               int64_t trace_max_events) const {
  if (backend_->virtual_time()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: backend 'sim' runs in one process (virtual time)", topology_.source));
  }
  absl::StatusOr<std::unique_ptr<engine::serving::SchedulingPolicy>> policy =
      make_device_policy(topology_);
  if (!policy.ok()) return policy.status();
  absl::StatusOr<std::shared_ptr<RunContext>> ctx = make_context();
  if (!ctx.ok()) return ctx.status();
  (*ctx)->trace = trace_max_events >= 0
                      ? std::make_shared<engine::trace::TraceRecorder>(trace_max_events)
                      : nullptr;
  (*ctx)->routing = nullptr;
  build_wiring(sys, *ctx,
               std::shared_ptr<const engine::serving::SchedulingPolicy>(std::move(*policy)),
               &layout);
  (*ctx)->actors.coordinator = layout.remote({ActorRole::kCoordinator, 0, 0}, -1);
  return ctx;
}

absl::StatusOr<SourceSubmissionPtr> Server::checked_source(
    std::vector<engine::serving::Request> requests) const {
  if (absl::Status s = validate(requests); !s.ok()) return s;
  std::sort(requests.begin(), requests.end(),
            [](const engine::serving::Request& a, const engine::serving::Request& b) {
              return std::tie(a.arrival_s, a.id) < std::tie(b.arrival_s, b.id);
            });
  auto sub = std::make_shared<SourceSubmission>();
  sub->source = engine::serving::make_vector_source(std::move(requests));
  sub->materialized = true;
  return sub;  // checked here: no validate on pull
}

absl::StatusOr<RunOutcome> Server::run(std::vector<engine::serving::Request> requests,
                                       RunCallbacks callbacks) {
  absl::StatusOr<SourceSubmissionPtr> sub = checked_source(std::move(requests));
  if (!sub.ok()) return sub.status();
  if (!topology_.workers.empty() && group_) return run_recovering(*sub, std::move(callbacks));
  std::vector<RunCallbacks> cbs;
  cbs.push_back(std::move(callbacks));
  absl::StatusOr<std::vector<RunOutcome>> out = run_together({this}, {*sub}, std::move(cbs));
  if (!out.ok()) return out.status();
  return std::move(out->front());
}

absl::StatusOr<RunOutcome> Server::run(engine::serving::RequestSourcePtr source,
                                       RunCallbacks callbacks) {
  if (!source) return absl::InvalidArgumentError("Server::run: null request source");
  auto sub = std::make_shared<SourceSubmission>();
  sub->source = std::move(source);
  sub->validate = [this](const engine::serving::Request& r) { return validate_request(r); };
  if (!topology_.workers.empty() && group_) return run_recovering(sub, std::move(callbacks));
  std::vector<RunCallbacks> cbs;
  cbs.push_back(std::move(callbacks));
  absl::StatusOr<std::vector<RunOutcome>> out = run_together({this}, {sub}, std::move(cbs));
  if (!out.ok()) return out.status();
  return std::move(out->front());
}

absl::StatusOr<std::pair<RunOutcome, RunOutcome>> Server::run_colocated(
    Server& other, std::vector<engine::serving::Request> mine,
    std::vector<engine::serving::Request> theirs, RunCallbacks mine_callbacks,
    RunCallbacks theirs_callbacks) {
  const auto& a = topology_;
  const auto& b = other.topology_;
  if (a.backend != b.backend) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "colocation: %s runs backend '%s' but %s '%s'", a.source, a.backend, b.source, b.backend));
  }
  bool same_cluster = a.devices.size() == b.devices.size();
  for (size_t d = 0; same_cluster && d < a.devices.size(); ++d) {
    same_cluster = a.devices[d].kind == b.devices[d].kind && a.devices[d].node == b.devices[d].node;
  }
  if (!same_cluster) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "colocation: %s and %s must declare the same devices (count, kinds and nodes, in order)",
        a.source, b.source));
  }
  absl::StatusOr<SourceSubmissionPtr> mine_source = checked_source(std::move(mine));
  if (!mine_source.ok()) return mine_source.status();
  absl::StatusOr<SourceSubmissionPtr> theirs_source = other.checked_source(std::move(theirs));
  if (!theirs_source.ok()) return theirs_source.status();
  std::vector<RunCallbacks> cbs;
  cbs.push_back(std::move(mine_callbacks));
  cbs.push_back(std::move(theirs_callbacks));
  absl::StatusOr<std::vector<RunOutcome>> out =
      run_together({this, &other}, {*mine_source, *theirs_source}, std::move(cbs));
  if (!out.ok()) return out.status();
  return std::make_pair(std::move((*out)[0]), std::move((*out)[1]));
}

}  // namespace muflow::actors
