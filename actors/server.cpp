#include "actors/server.hpp"

#include <cmath>
#include <thread>

#include <caf/scheduler/test_coordinator.hpp>

#include "absl/strings/str_format.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/messages.hpp"
#include "actors/sim_backend.hpp"
#include "actors/wirings/registry.hpp"
#include "actors/placement_setup.hpp"
#include "kernels/assert.hpp"
#include "actors/graph_builder.hpp"
#include "engine/cpu_executor.hpp"
#include "engine/hf_config.hpp"
#include "engine/kv_admission.hpp"
#include "engine/model_loader.hpp"
#include "engine/placement.hpp"
#include "engine/synthetic_model.hpp"
#include "engine/workload.hpp"

namespace muflow::actors {
namespace {
constexpr double kMaxArrivalS = 1e7;  // ~116 days: keeps timer arithmetic far from overflow
}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::create(engine::Topology topology) {
  absl::StatusOr<const Wiring*> wiring = find_wiring(topology.wiring);
  if (!wiring.ok()) {
    return absl::Status(wiring.status().code(),
                        absl::StrCat(topology.source, ": ", wiring.status().message()));
  }
  if (topology.backend != "cpu" && topology.backend != "sim") {
    return absl::UnimplementedError(absl::StrFormat(
        "%s: backend '%s' is not available in this build; expected: cpu, sim", topology.source,
        topology.backend));
  }
  if (topology.scheduler.max_batch_requests < 1 || topology.scheduler.max_prefill_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: keys 'scheduler.max_batch_requests' and 'scheduler.max_prefill_tokens' must be >= 1 "
        "(got %d and %d)",
        topology.source, topology.scheduler.max_batch_requests,
        topology.scheduler.max_prefill_tokens));
  }
  std::shared_ptr<const engine::ModelWeights> weights;
  std::unique_ptr<Server> server(new Server());
  if (topology.backend == "sim") {
    // No weights: dims from a preset, synthetic dims, or an HF folder's config.json.
    absl::StatusOr<engine::ModelConfig> config =
        !topology.model.path.empty()
            ? engine::parse_hf_config(topology.model.path + "/config.json")
            : (topology.model.synthetic ? absl::StatusOr<engine::ModelConfig>(
                                              *topology.model.synthetic)
                                        : absl::InvalidArgumentError("no model"));
    if (!config.ok()) return config.status();
    if (absl::Status s = config->validate(); !s.ok()) return s;
    if (absl::Status s = engine::check_topology_against_model(topology, *config); !s.ok()) {
      return s;
    }
    absl::StatusOr<SimSetup> sim = make_sim_setup(topology, *config);
    if (!sim.ok()) return sim.status();
    server->sim_ = std::make_unique<SimSetup>(std::move(*sim));
    server->config_ = *config;
  } else if (!topology.model.path.empty()) {
    absl::StatusOr<std::shared_ptr<const engine::ModelWeights>> loaded =
        engine::load_hf_model(topology.model.path);
    if (!loaded.ok()) return loaded.status();
    weights = *loaded;
  } else if (topology.model.synthetic) {
    if (absl::Status s = topology.model.synthetic->validate(); !s.ok()) return s;
    const engine::DType dtype =
        topology.model.dtype == "bf16" ? engine::DType::kBF16 : engine::DType::kF32;
    weights = std::make_shared<const engine::ModelWeights>(
        engine::make_synthetic_model(*topology.model.synthetic, topology.model.seed, dtype));
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: [model] needs either 'path' or synthetic dims", topology.source));
  }
  if (!topology.model.path.empty()) {
    // Text prompts need the folder's tokenizer, on the sim backend too (no weights there).
    absl::StatusOr<std::unique_ptr<engine::Tokenizer>> tok =
        engine::Tokenizer::load_from_model_dir(topology.model.path);
    if (tok.ok()) {
      server->tokenizer_ = std::move(*tok);
    } else if (!absl::IsNotFound(tok.status())) {
      return tok.status();
    }
  }
  if (weights) {
    absl::StatusOr<std::shared_ptr<const engine::CpuModel>> model =
        engine::CpuModel::prepare(weights);
    if (!model.ok()) return model.status();
    server->model_ = *model;
    server->config_ = server->model_->config();
    if (absl::Status s = engine::check_topology_against_model(topology, server->config_);
        !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<engine::Placement> placement =
      engine::make_placement(topology, server->config_.num_experts,
                             (*wiring)->traits().disaggregated_attention);
  if (!placement.ok()) return placement.status();
  if (topology.placement == "affinity") {
    if (absl::Status s = apply_affinity_placement(topology, server->config_, &*placement);
        !s.ok()) {
      return s;
    }
  }
  if (topology.placement == "capability") {
    server->topology_ = topology;  // sim_precision() reads it
    if (absl::Status s = apply_capability_placement(
            topology, server->config_, server->sim_.get(),
            server->sim_ ? server->sim_precision() : kernels::sim::Precision::kF32, &*placement);
        !s.ok()) {
      return s;
    }
  }
  server->placement_ = *placement;
  if ((topology.expert_replicas > 0 || !topology.replica_experts.empty()) &&
      !(*wiring)->traits().expert_replicas) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: key '%s' applies to wiring %s, got \"%s\"", topology.source,
        topology.replica_experts.empty() ? "placement.replicas" : "placement.replica_experts",
        wirings_with([](const WiringTraits& t) { return t.expert_replicas; }), topology.wiring));
  }
  server->topology_ = topology;  // sim_precision() reads it
  WiringSetup setup{topology, server->config_, *placement};
  setup.sim = server->sim_.get();
  setup.precision = server->sim_ ? server->sim_precision() : kernels::sim::Precision::kF32;
  setup.weight_bytes = topology.model.dtype == "bf16" ? 2 : 4;
  setup.weights = weights;
  setup.model = server->model_;
  absl::StatusOr<std::shared_ptr<const PreparedWiring>> prepared = (*wiring)->prepare(setup);
  if (!prepared.ok()) return prepared.status();
  server->wiring_ = std::move(*prepared);
  if (absl::StatusOr<std::unique_ptr<engine::SchedulingPolicy>> pol =
          engine::make_scheduling_policy(topology.scheduler.policy);
      !pol.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: key 'scheduler.policy': %s", topology.source, pol.status().message()));
  }
  server->topology_ = std::move(topology);
  return server;
}

absl::StatusOr<std::vector<engine::Request>> Server::make_workload() const {
  engine::EncodeFn encode;
  if (tokenizer_) {
    encode = [this](const std::string& text) { return tokenizer_->encode(text, true); };
  }
  return engine::make_requests(topology_.workload, config().vocab_size, encode);
}

absl::Status Server::validate(const std::vector<engine::Request>& requests) const {
  for (size_t i = 0; i < requests.size(); ++i) {
    const engine::Request& r = requests[i];
    if (r.id != static_cast<int64_t>(i)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "request at index %d has id %d; ids must be 0..n-1 in order", i, r.id));
    }
    if (absl::Status s = validate_request(r); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Server::validate_request(const engine::Request& r) const {
  const engine::ModelConfig& c = config();
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
    return absl::InvalidArgumentError(absl::StrFormat(
        "request %d: arrival time %g s; expected a finite time in [0, %g] s", r.id, r.arrival_s,
        kMaxArrivalS));
  }
  if (sim_ && r.return_prompt_logits) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "request %d: prompt logits are not available on backend 'sim' (no math)", r.id));
  }
  if (r.max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("request %d: max_new_tokens must be >= 1", r.id));
  }
  if (static_cast<int64_t>(r.prompt.size()) >= c.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "request %d: prompt of %d tokens does not fit max_position_embeddings = %d", r.id,
        r.prompt.size(), c.max_position_embeddings));
  }
  return absl::OkStatus();
}

namespace {

// Discrete-event loop of the testing scheduler: run every ready actor, then jump the virtual
// clock to the next delayed message; stops when nothing is left (TOOLCHAIN.md).
void run_virtual_time(caf::actor_system& sys) {
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  for (;;) {
    sched.run();
    if (!sched.trigger_timeout()) break;
  }
}

}  // namespace

kernels::sim::Precision Server::sim_precision() const {
  return topology_.model.dtype == "bf16" ? kernels::sim::Precision::kBF16
                                         : kernels::sim::Precision::kF32;
}

absl::StatusOr<std::shared_ptr<RunContext>> Server::make_context() const {
  const bool sim = sim_ != nullptr;
  auto ctx = std::make_shared<RunContext>();
  ctx->model = model_;
  ctx->config = config_;
  if (sim) {
    ctx->virtual_time = true;
    ctx->executors = make_sim_executors(*sim_, config_, sim_precision());
    absl::StatusOr<std::shared_ptr<transport::BigSwitchNetwork>> net = make_sim_network(*sim_);
    if (!net.ok()) return net.status();
    ctx->network = *net;
    ctx->activation_bytes = topology_.network.activation_bytes;
    absl::StatusOr<transport::A2aOrder> order =
        transport::parse_a2a_order(topology_.network.a2a_order);
    if (!order.ok()) return order.status();
    ctx->a2a_order = *order;
    ctx->a2a_seed = topology_.router.seed;
  } else {
    for (size_t d = 0; d < topology_.devices.size(); ++d) {
      ctx->executors.push_back(
          std::make_shared<engine::CpuExecutor>(model_, wiring_->cpu_shards()));
    }
  }
  ctx->topology = topology_;
  ctx->placement = placement_;
  if (!topology_.trace_file.empty()) ctx->trace = std::make_shared<engine::TraceRecorder>();
  if (!topology_.routing_record_file.empty()) {
    ctx->routing = std::make_shared<engine::RoutingRecorder>();
  }
  // KV-cache capacity per DP rank for admission: on sim the device's memory (90% usable)
  // less the weights it holds; on cpu unlimited (host memory).
  const int64_t elem_bytes = topology_.model.dtype == "bf16" ? 2 : 4;
  ctx->kv_bytes_per_token = engine::kv_bytes_per_token(config_, elem_bytes);
  for (int64_t d : ctx->placement.rank_device) {
    int64_t capacity = -1;
    if (sim) {
      const int64_t experts_here = static_cast<int64_t>(ctx->placement.experts_on(d).size());
      capacity = std::max<int64_t>(
          0, static_cast<int64_t>(0.9 * static_cast<double>(sim_->kinds[d].memory_bytes)) -
                 engine::resident_weight_bytes(config_, true, experts_here, elem_bytes));
    }
    ctx->kv_capacity_bytes.push_back(capacity);
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
    ctx.trace->set_other_data("metrics", engine::to_json(outcome.metrics));
    ctx.trace->set_other_data("num_devices", ctx.placement.num_devices);
    ctx.trace->set_other_data("num_layers", config().num_layers);
    ctx.trace->set_other_data("num_experts", config().num_experts);
    ctx.trace->set_other_data("expert_device", ctx.placement.expert_device);
    if (!ctx.placement.block_expert_device.empty()) {
      ctx.trace->set_other_data("block_expert_device", ctx.placement.block_expert_device);
    }
    if (absl::Status s = ctx.trace->write_json(topology_.trace_file); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RunOutcome>> Server::run_together(
    const std::vector<Server*>& servers, std::vector<std::vector<engine::Request>> requests,
    std::vector<RunCallbacks> callbacks) {
  const size_t n = servers.size();
  MUFLOW_ASSERT(n >= 1 && requests.size() == n && callbacks.size() == n,
                "run_together: one request list and callback set per server");
  for (size_t i = 0; i < n; ++i) {
    if (absl::Status s = servers[i]->validate(requests[i]); !s.ok()) return s;
    std::sort(requests[i].begin(), requests[i].end(),
              [](const engine::Request& a, const engine::Request& b) {
                return std::tie(a.arrival_s, a.id) < std::tie(b.arrival_s, b.id);
              });
  }
  const Server& first = *servers.front();
  const bool sim = first.sim_ != nullptr;
  caf::actor_system_config cfg;
  if (sim) {
    // Virtual time: CAF's deterministic scheduler runs every actor on this thread and
    // delayed messages fire when the loop below advances the clock (ARCHITECTURE.md §4).
    cfg.set("scheduler.policy", caf::atom("testing"));
  } else {
    const auto threads = std::max<size_t>(
        1, std::min<size_t>(std::thread::hardware_concurrency(), first.topology_.devices.size()));
    cfg.set("scheduler.max-threads", threads);
  }
  caf::actor_system sys{cfg};

  // Everything that can fail comes before the first actor is spawned (an actor system with
  // live actors would wait for them forever on an early return).
  std::vector<std::shared_ptr<RunContext>> ctxs;
  for (size_t i = 0; i < n; ++i) {
    absl::StatusOr<std::shared_ptr<RunContext>> ctx = servers[i]->make_context();
    if (!ctx.ok()) return ctx.status();
    // Colocated runs share the devices' network ports (one big switch: the first topology's).
    if (i > 0 && sim) (*ctx)->network = ctxs.front()->network;
    ctxs.push_back(*ctx);
  }
  absl::StatusOr<std::unique_ptr<engine::SchedulingPolicy>> policy =
      engine::make_scheduling_policy(first.topology_.scheduler.policy);
  if (!policy.ok()) return policy.status();
  std::vector<std::vector<DeviceStage>> local;
  for (const auto& ctx : ctxs) build_stages(sys, ctx, local);
  spawn_devices(sys, ctxs, std::move(local),
                std::shared_ptr<const engine::SchedulingPolicy>(std::move(*policy)));
  const auto t0 = sys.clock().now();
  for (size_t i = 0; i < n; ++i) {
    ctxs[i]->t0 = t0;
    ctxs[i]->actors.coordinator = spawn_coordinator(sys, ctxs[i], std::move(callbacks[i]));
  }

  std::vector<RunOutcome> outcomes(n);
  {
    std::vector<std::unique_ptr<caf::scoped_actor>> selves;
    for (size_t i = 0; i < n; ++i) {
      selves.push_back(std::make_unique<caf::scoped_actor>(sys));
      caf::scoped_actor& self = *selves.back();
      // The batch run is a client of the coordinator: start, submit every request at once
      // (admitted at their arrival times), drain.
      const caf::actor& coordinator = ctxs[i]->actors.coordinator;
      self->monitor(coordinator);
      self->send(coordinator, start_atom::value);
      auto submission = std::make_shared<Submission>();
      submission->requests = std::move(requests[i]);
      self->send(coordinator, submit_atom::value, std::move(submission));
      self->send(coordinator, drain_atom::value, caf::actor_cast<caf::actor>(self));
    }
    if (sim) run_virtual_time(sys);
    for (size_t i = 0; i < n; ++i) {
      caf::scoped_actor& self = *selves[i];
      RunOutcome& outcome = outcomes[i];
      bool received = false;
      auto on_outcome = [&](const RunOutcomePtr& result) {
        outcome = std::move(*result);
        received = true;
      };
      auto on_down = [&](const caf::down_msg& down) {
        outcome.status = absl::InternalError("the coordinator stopped unexpectedly: " +
                                             sys.render(down.reason));
        received = true;
      };
      if (sim) {
        // Everything has run; the outcome (or the coordinator's death) is already queued.
        self->receive(on_outcome, on_down, caf::after(std::chrono::seconds(0)) >> [&] {
          outcome.status = absl::InternalError(
              "the simulation ran out of events before every request finished");
          received = true;
        });
      } else {
        self->receive_while([&] { return !received; })(on_outcome, on_down);
      }
    }
  }
  auto stop = [](const caf::actor& a) {
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  };
  for (const auto& ctx : ctxs) {
    ctx->actors.for_each_wiring_actor(stop);
    if (ctx->actors.coordinator) stop(ctx->actors.coordinator);
  }
  if (sim) run_virtual_time(sys);
  sys.await_all_actors_done();  // nothing reads ctx or records trace events after this
  for (size_t i = 0; i < n; ++i) {
    if (!outcomes[i].status.ok()) return outcomes[i].status;
    if (absl::Status s = servers[i]->finish_run(*ctxs[i], outcomes[i]); !s.ok()) return s;
  }
  return outcomes;
}

absl::StatusOr<RunOutcome> Server::run(std::vector<engine::Request> requests,
                                       RunCallbacks callbacks) {
  std::vector<std::vector<engine::Request>> all;
  all.push_back(std::move(requests));
  std::vector<RunCallbacks> cbs;
  cbs.push_back(std::move(callbacks));
  absl::StatusOr<std::vector<RunOutcome>> out = run_together({this}, std::move(all), std::move(cbs));
  if (!out.ok()) return out.status();
  return std::move(out->front());
}

absl::StatusOr<std::pair<RunOutcome, RunOutcome>> Server::run_colocated(
    Server& other, std::vector<engine::Request> mine, std::vector<engine::Request> theirs) {
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
  std::vector<std::vector<engine::Request>> all;
  all.push_back(std::move(mine));
  all.push_back(std::move(theirs));
  absl::StatusOr<std::vector<RunOutcome>> out =
      run_together({this, &other}, std::move(all), std::vector<RunCallbacks>(2));
  if (!out.ok()) return out.status();
  return std::make_pair(std::move((*out)[0]), std::move((*out)[1]));
}

}  // namespace muflow::actors
