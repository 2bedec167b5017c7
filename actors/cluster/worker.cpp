#include "actors/cluster/worker.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "actors/cluster/cluster_layout.hpp"
#include "actors/cluster/control_messages.hpp"
#include "actors/cluster/frame_kinds.hpp"
#include "actors/cluster/remote_actor.hpp"
#include "actors/server.hpp"
#include "actors/stage_probe.hpp"
#include "engine/topology/topology.hpp"
#include "engine/trace/trace.hpp"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "transport/cluster/cluster_secret.hpp"
#include "transport/cluster/data_plane.hpp"
#include "transport/cluster/frame.hpp"

namespace muflow::actors::cluster {
namespace {

using transport::cluster::ClusterSecret;
using transport::cluster::DataPlane;
using transport::cluster::Nonce;
using transport::cluster::Received;

// For each hosted stage's answer to cl_stats (the driver's own timeout is longer).
constexpr std::chrono::milliseconds kStageProbeTimeout{2'000};

// This worker's share of a driver's run (cl_setup .. cl_stop).
struct HostedRun {
  std::shared_ptr<const Server> server;  // the topology's model, placement and wiring
  std::shared_ptr<Outbox> outbox;
  std::unique_ptr<ClusterLayout> layout;
  std::shared_ptr<RunContext> ctx;
  ActorMessageLimits limits;
  std::atomic<bool> started{false};  // frames are delivered from cl_start on (set under run_mu)
};

// What the gate actor and the data plane's progress thread share.
struct WorkerNode {
  WorkerNode(ClusterSecret s, int64_t max_bytes, caf::actor_system& runs)
      : secret(std::move(s)), max_message_bytes(max_bytes), run_system(runs) {}
  const ClusterSecret secret;
  const int64_t max_message_bytes;
  // The actor system of the hosted runs' actors (stages, devices, collectives): its scheduler
  // threads are the worker's `--threads`, and nothing else runs on them. The gate lives in
  // the control system (CAF's middleman), where it may block while a run is set up or
  // stopped without taking a thread from the stages.
  caf::actor_system& run_system;
  std::mutex mu;  // guards plane's creation and replacement, and driver_address
  // Made by a driver's join, and made again when a join comes from another data plane of the
  // driver (its next attempt): see the join handler.
  std::unique_ptr<DataPlane> plane;
  std::string driver_address;  // the UCX address of the driver's plane that `plane` joined
  std::atomic<DataPlane*> plane_ptr{nullptr};
  std::atomic<uint64_t> rejected_frames{0};
  // actor messages that came while no run was started, or of another run attempt
  std::atomic<uint64_t> late_frames{0};
  std::mutex run_mu;               // guards run (the gate writes it, the progress thread reads)
  std::shared_ptr<HostedRun> run;  // the run this worker hosts, if any
  // The last run's model, kept for the next run of the same topology text and folder (the
  // gate's only): a later run, e.g. one that re-places a lost worker's devices here, starts
  // without loading the model again.
  std::shared_ptr<const Server> server;
  std::string server_key;
};

// Stops `run`'s actors and waits (at most a few seconds) until the local ones are gone; its
// outbox is closed first, so nothing more leaves for the other processes.
void stop_run(caf::actor_system& sys, HostedRun& run) {
  run.outbox->close();
  caf::scoped_actor self{sys};
  std::unordered_set<caf::actor_id> remote;
  for (const auto& [process, a] : run.layout->remotes()) remote.insert(a.id());
  size_t local = 0;
  run.ctx->actors.for_each_wiring_actor([&](const caf::actor& a) {
    if (remote.count(a.id()) == 0) {
      self->monitor(a);
      ++local;
    }
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  });
  size_t down = 0;
  bool timed_out = false;
  self->receive_while([&] { return down < local && !timed_out; })(
      [&](caf::down_msg&) { ++down; },
      caf::after(std::chrono::seconds(10)) >> [&] { timed_out = true; });
  if (timed_out) {
    spdlog::warn("muflow worker: {} of the run's {} actors did not stop within 10 s", local - down,
                 local);
  }
}

// Data plane handler (progress thread): check the frame, answer pings, reject the rest.
void on_message(WorkerNode& node, Received&& r) {
  auto reject = [&](const std::string& why) {
    node.rejected_frames.fetch_add(1, std::memory_order_relaxed);
    spdlog::error("muflow worker: rejected a {}-byte data-plane message (UCX tag {}): {}", r.size,
                  r.tag, why);
  };
  auto frame = transport::cluster::parse_frame(r.view());
  if (!frame.ok()) return reject(std::string(frame.status().message()));
  if (frame->prefix.source != r.tag) {
    return reject(absl::StrFormat("its frame claims process %d", frame->prefix.source));
  }
  DataPlane* plane = node.plane_ptr.load(std::memory_order_acquire);
  if (plane == nullptr) return;  // stopping: run_worker cleared it, nothing is answered
  switch (static_cast<FrameKind>(frame->prefix.kind)) {
    case FrameKind::kPing: {
      {
        // The heartbeat bounds how long a quiet worker's reports wait (Outbox).
        std::lock_guard<std::mutex> lock(node.run_mu);
        if (node.run && node.run->started) node.run->outbox->flush_aged();
      }
      transport::cluster::FramePrefix p = frame->prefix;
      p.kind = static_cast<uint16_t>(FrameKind::kPong);
      p.source = plane->options().process;
      plane->send(frame->prefix.source,
                  {transport::cluster::encode_frame_prefix(p),
                   std::vector<char>(frame->header.begin(), frame->header.end()),
                   std::vector<char>(frame->payload.begin(), frame->payload.end())});
      return;
    }
    case FrameKind::kActorMessage: {
      std::shared_ptr<HostedRun> run;
      {
        std::lock_guard<std::mutex> lock(node.run_mu);
        run = node.run;
      }
      if (!run || !run->started) {
        // Late messages of a run that ended (e.g. one failed by a lost worker): nothing to
        // deliver them to; counted, not logged one by one.
        node.late_frames.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      absl::StatusOr<FrameDelivery> done =
          deliver_actor_frame(*run->ctx, *run->layout, *frame, run->limits);
      if (!done.ok()) {
        reject(std::string(done.status().message()));
        fail_run(*run->ctx, *run->layout, run->outbox.get(),
                 absl::StrFormat("worker process %d rejected a message from process %d: %s",
                                 run->layout->self(), r.tag, done.status().message()));
      } else if (*done == FrameDelivery::kOtherRun) {
        // A straggler of an earlier attempt (the run was set up again after a lost worker).
        node.late_frames.fetch_add(1, std::memory_order_relaxed);
      }
      return;
    }
    default:
      return reject(absl::StrFormat("unknown frame kind %d", frame->prefix.kind));
  }
}

// Data plane (progress thread): a message larger than --max-message-mib was drained. If a run
// is hosted, it cannot finish without the message (the plane cannot tell which run it was for:
// the current one, or a late one of a run that ended), so it fails with the reason instead of
// waiting for it.
void on_rejected(WorkerNode& node, uint64_t tag, uint64_t bytes, const std::string& why) {
  std::shared_ptr<HostedRun> run;
  {
    std::lock_guard<std::mutex> lock(node.run_mu);
    run = node.run;
  }
  if (!run || !run->started) return;
  fail_run(*run->ctx, *run->layout, run->outbox.get(),
           absl::StrFormat("worker process %d dropped a %d-byte message from process %d: %s",
                           run->layout->self(), bytes, tag, why));
}

// Takes the hosted run away (the progress thread delivers nothing to it afterwards).
std::shared_ptr<HostedRun> take_run(WorkerNode& node) {
  std::lock_guard<std::mutex> lock(node.run_mu);
  return std::exchange(node.run, nullptr);
}

// Builds this worker's share of a run: the driver's topology parsed here, the model loaded,
// the other workers' data planes connected, the hosted devices spawned.
absl::StatusOr<std::shared_ptr<HostedRun>> setup_run(
    caf::actor_system& sys, WorkerNode& node, const std::string& text, const std::string& base_dir,
    const std::vector<std::string>& addresses, const std::string& device_map,
    int64_t trace_max_events, uint64_t run_number) {
  const uint32_t self = node.plane->options().process;
  absl::StatusOr<engine::topology::Topology> topo = engine::topology::parse_topology_string(
      text, absl::StrFormat("the driver's topology (folder %s)", base_dir), base_dir);
  if (!topo.ok()) return topo.status();
  if (self == 0 || self > topo->workers.size() || addresses.size() != topo->workers.size() + 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "this worker joined as process %d; the topology lists %d workers and the driver sent "
        "%d addresses",
        self, topo->workers.size(), addresses.size()));
  }
  // Which process hosts each device: the topology's workers, or (after the driver lost a
  // worker) the re-placement it sent.
  absl::StatusOr<std::vector<uint32_t>> device_process = parse_device_processes(
      device_map, topo->devices.size(), static_cast<uint32_t>(addresses.size()));
  if (!device_process.ok()) return device_process.status();
  for (size_t p = 1; p < addresses.size(); ++p) {
    if (p == self) continue;
    if (addresses[p].empty()) {  // a worker the driver lost: forget its endpoint and sends
      node.plane->drop_peer(static_cast<uint32_t>(p));
      continue;
    }
    if (absl::Status s = node.plane->connect(static_cast<uint32_t>(p),
                                             {addresses[p].data(), addresses[p].size()});
        !s.ok()) {
      return s;
    }
  }
  auto run = std::make_shared<HostedRun>();
  const std::string key = base_dir + '\0' + text;
  if (!node.server || node.server_key != key) {
    node.server = nullptr;  // the old model is freed before the new one is loaded
    absl::StatusOr<std::unique_ptr<Server>> server = Server::create(*topo);
    if (!server.ok()) return server.status();
    node.server = std::move(*server);
    node.server_key = key;
  }
  run->server = node.server;
  std::vector<int64_t> hosted;
  for (size_t d = 0; d < device_process->size(); ++d) {
    if ((*device_process)[d] == self) hosted.push_back(static_cast<int64_t>(d));
  }
  run->outbox = std::make_shared<Outbox>(node.plane.get(), self, run_number);
  // A message of this run that cannot be sent (e.g. larger than the data plane's limit) fails
  // the run at the driver, instead of leaving it waiting for the message.
  run->outbox->on_undeliverable(
      [out = std::weak_ptr<Outbox>(run->outbox), self](const std::string& what) {
        std::shared_ptr<Outbox> o = out.lock();
        return o != nullptr &&
               o->send(0, {ActorRole::kCoordinator, 0, 0},
                       caf::make_message(failed_atom::value,
                                         absl::StrFormat("worker process %d %s", self, what))
                           .content())
                   .ok();
      });
  run->layout = std::make_unique<ClusterLayout>(sys, self, std::move(*device_process), run->outbox,
                                                run_number);
  absl::StatusOr<std::shared_ptr<RunContext>> ctx =
      run->server->host_share(sys, *run->layout, trace_max_events);
  if (!ctx.ok()) return ctx.status();
  run->ctx = std::move(*ctx);
  run->limits = limits_for(run->ctx->config, *topo);
  spdlog::info("muflow worker: process {} hosts devices [{}] of a {} run ({} wiring)", self,
               absl::StrJoin(hosted, ", "), topo->backend, topo->wiring);
  return run;
}

struct GateState {
  std::shared_ptr<WorkerNode> node;
  std::map<caf::node_id, Nonce> challenges;  // outstanding, one per driver node
  std::set<caf::node_id> authenticated;
  // The last stopped run's trace, until cl_trace takes it or the next setup.
  std::shared_ptr<const engine::trace::TraceRecorder> last_trace;
  static inline const char* name = "muflow-worker-gate";
};

std::string bytes_of(const Nonce& n) { return std::string(n.begin(), n.end()); }

caf::behavior gate_actor(caf::stateful_actor<GateState>* self, std::shared_ptr<WorkerNode> node) {
  self->state.node = std::move(node);
  auto sender_node = [self]() -> caf::node_id {
    const auto& s = self->current_sender();
    return s ? s->node() : caf::node_id{};
  };
  auto refuse = [](const caf::node_id& from, const std::string& why) {
    spdlog::error("muflow worker: refused a connection from node {}: {}", caf::to_string(from),
                  why);
    return caf::make_error(caf::sec::request_receiver_down, "refused: " + why);
  };
  return {
      [=](hello_atom) -> caf::result<std::string> {
        const caf::node_id from = sender_node();
        if (!from) return refuse(from, "anonymous sender");
        auto nonce = transport::cluster::make_nonce();
        if (!nonce.ok()) return refuse(from, std::string(nonce.status().message()));
        self->state.challenges[from] = *nonce;  // a new hello replaces an older challenge
        return bytes_of(*nonce);
      },
      [=](auth_atom, const std::string& proof,
          const std::string& driver_nonce) -> caf::result<std::string> {
        const caf::node_id from = sender_node();
        auto it = self->state.challenges.find(from);
        if (it == self->state.challenges.end()) return refuse(from, "auth without hello");
        const Nonce challenge = it->second;
        self->state.challenges.erase(it);  // one attempt per challenge
        const auto* p = reinterpret_cast<const uint8_t*>(proof.data());
        if (!self->state.node->secret.verify(challenge, kConnectorRole, {p, proof.size()})) {
          return refuse(from, "wrong cluster token (MUFLOW_CLUSTER_TOKEN / --token-file differ)");
        }
        if (driver_nonce.size() != Nonce{}.size()) return refuse(from, "malformed nonce");
        Nonce dn{};
        std::copy(driver_nonce.begin(), driver_nonce.end(), dn.begin());
        self->state.authenticated.insert(from);
        spdlog::info("muflow worker: driver node {} authenticated", caf::to_string(from));
        const transport::cluster::Proof answer = self->state.node->secret.prove(dn, kAcceptorRole);
        return std::string(answer.begin(), answer.end());
      },
      [=](join_atom, uint32_t process,
          const std::string& driver_address) -> caf::result<std::string> {
        const caf::node_id from = sender_node();
        if (self->state.authenticated.count(from) == 0) return refuse(from, "join before auth");
        WorkerNode& node = *self->state.node;
        std::lock_guard<std::mutex> lock(node.mu);
        if (node.plane && node.plane->options().process != process) {
          return refuse(
              from, absl::StrFormat("already joined as process %d", node.plane->options().process));
        }
        if (process == 0) return refuse(from, "process index 0 is the driver's");
        if (node.plane && node.driver_address != driver_address) {
          // The driver's next attempt (it makes a data plane per attempt, e.g. after it lost a
          // worker): this worker's plane is made afresh too, so that no UCX state of the last
          // attempt carries over. A survivor that kept its plane across a peer's kill -9
          // sometimes received nothing more from the driver's new plane, its progress thread
          // spinning on ucp_worker_arm's UCS_ERR_BUSY, until the heartbeat declared it lost too
          // (bench/README.md, "Surviving a dead worker", stop 58). The last attempt's run is
          // stopped first (its outbox sends through the old plane), and the old plane's peers
          // are dropped, so that its shutdown does not wait for sends to a dead one.
          if (std::shared_ptr<HostedRun> old = take_run(node)) {
            spdlog::warn(
                "muflow worker: a new attempt of the driver replaces a run that was not "
                "stopped");
            stop_run(node.run_system, *old);
          }
          node.plane_ptr.store(nullptr, std::memory_order_release);
          node.plane->drop_all_peers();
          node.plane.reset();
        }
        if (!node.plane) {
          DataPlane::Options o;
          o.process = process;
          o.max_message_bytes = node.max_message_bytes;
          o.name = absl::StrFormat("worker %d data plane", process);
          auto plane = DataPlane::create(
              o, [n = self->state.node](Received&& r) { on_message(*n, std::move(r)); },
              [n = self->state.node](uint64_t tag, uint64_t bytes, const std::string& why) {
                on_rejected(*n, tag, bytes, why);
              });
          if (!plane.ok()) return refuse(from, std::string(plane.status().message()));
          node.plane = std::move(*plane);
          node.plane_ptr.store(node.plane.get(), std::memory_order_release);
        }
        auto st = node.plane->connect(0, {driver_address.data(), driver_address.size()});
        if (!st.ok()) return refuse(from, std::string(st.message()));
        node.driver_address = driver_address;
        spdlog::info("muflow worker: joined the data plane as process {} (messages up to {} bytes)",
                     process, node.max_message_bytes);
        const auto& a = node.plane->address();
        return std::string(a.begin(), a.end());
      },
      [=](setup_atom, const std::string& text, const std::string& base_dir,
          const std::vector<std::string>& addresses, const std::string& device_map,
          int64_t trace_max_events, uint64_t run_number) -> caf::result<std::string> {
        const caf::node_id from = sender_node();
        WorkerNode& node = *self->state.node;
        if (self->state.authenticated.count(from) == 0 || !node.plane) {
          return refuse(from, "run setup before auth and join");
        }
        if (std::shared_ptr<HostedRun> old = take_run(node)) {
          spdlog::warn("muflow worker: a new run replaces one that was not stopped");
          stop_run(node.run_system, *old);
        }
        self->state.last_trace = nullptr;
        if (trace_max_events < -1 || trace_max_events > (int64_t{1} << 32)) {
          return absl::StrFormat("a trace cap of %d events (expected -1 or 0 .. 2^32)",
                                 trace_max_events);
        }
        if (run_number == 0) return std::string("run number 0 (expected a driver's attempt, > 0)");
        absl::StatusOr<std::shared_ptr<HostedRun>> run =
            setup_run(node.run_system, node, text, base_dir, addresses, device_map,
                      trace_max_events, run_number);
        if (!run.ok()) {
          spdlog::error("muflow worker: run setup failed: {}", std::string(run.status().message()));
          return std::string(run.status().message());
        }
        std::lock_guard<std::mutex> lock(node.run_mu);
        node.run = std::move(*run);
        return std::string();
      },
      [=](run_start_atom) -> caf::result<std::string> {
        WorkerNode& node = *self->state.node;
        if (self->state.authenticated.count(sender_node()) == 0) {
          return refuse(sender_node(), "run start before auth");
        }
        std::lock_guard<std::mutex> lock(node.run_mu);
        if (!node.run) return std::string("no run was set up");
        node.run->ctx->t0 = node.run_system.clock().now();
        node.run->started = true;
        return std::string();
      },
      [=](run_stop_atom) -> caf::result<std::string> {
        if (self->state.authenticated.count(sender_node()) == 0) {
          return refuse(sender_node(), "run stop before auth");
        }
        if (std::shared_ptr<HostedRun> run = take_run(*self->state.node)) {
          stop_run(self->state.node->run_system, *run);
          self->state.last_trace = run->ctx->trace;
          spdlog::info("muflow worker: run stopped");
        }
        return std::string();
      },
      [=](run_trace_atom) -> caf::result<std::string> {
        if (self->state.authenticated.count(sender_node()) == 0) {
          return refuse(sender_node(), "trace request before auth");
        }
        std::shared_ptr<const engine::trace::TraceRecorder> trace =
            std::move(self->state.last_trace);
        self->state.last_trace = nullptr;
        return trace ? trace->to_json().dump() : std::string();
      },
      [=](run_stats_atom) -> caf::result<int64_t, int64_t, int64_t, int64_t> {
        using Answer = caf::result<int64_t, int64_t, int64_t, int64_t>;
        if (self->state.authenticated.count(sender_node()) == 0) {
          return refuse(sender_node(), "stats request before auth");
        }
        std::shared_ptr<HostedRun> run;
        {
          std::lock_guard<std::mutex> lock(self->state.node->run_mu);
          run = self->state.node->run;
        }
        if (!run || !run->started) return Answer(0, 0, 0, 0);
        const ClusterLayout* layout = run->layout.get();  // alive while `run` is
        absl::StatusOr<StageLoad> load = probe_stages(
            self->state.node->run_system, *run->ctx,
            [layout](int64_t device) { return layout->hosts_device(device); }, kStageProbeTimeout);
        if (!load.ok()) {
          return caf::make_error(caf::sec::runtime_error, std::string(load.status().message()));
        }
        return Answer(load->kv_bytes, load->queued_attention_tokens, load->queued_expert_tokens,
                      load->queued_sampler_tokens);
      },
  };
}

}  // namespace

int run_worker(const WorkerOptions& options) {
  // Log lines on stderr: stdout carries the "listening on" line a launcher reads.
  if (!spdlog::get("muflow-worker")) {
    spdlog::set_default_logger(spdlog::stderr_color_mt("muflow-worker"));
  }
  if (!is_loopback_host(options.listen.host) && !options.allow_remote) {
    std::fprintf(stderr,
                 "muflow worker: --listen %s:%d is not a loopback address; pass --allow-remote "
                 "to accept connections from other hosts (every peer must still prove the "
                 "cluster secret)\n",
                 options.listen.host.c_str(), options.listen.port);
    return 2;
  }
  auto secret = ClusterSecret::load(options.token_file);
  if (!secret.ok()) {
    std::fprintf(stderr, "muflow worker: %s\n", std::string(secret.status().message()).c_str());
    return 2;
  }
  // Signals go to sigwait below; threads started from here on inherit the mask.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  // The hosted devices' stages run on the scheduler threads of an actor system of their own
  // (cpu backend), exactly `threads` of them, with work sharing as in one process
  // (actors/backends/cpu.cpp says why): an idle thread sleeps on a condition variable instead
  // of polling with 50 µs sleeps, which preempts the GEMMs of the other processes' stages on a
  // shared machine. The runs' actors talk to other processes over the UCX data plane only, so
  // this system has no middleman. Declared first: it outlives the control system below, whose
  // gate thread holds its handles while it stops a run.
  const int64_t threads =
      options.threads > 0
          ? options.threads
          : std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()));
  caf::actor_system_config run_cfg;
  run_cfg.set("scheduler.max-threads", static_cast<size_t>(threads));
  run_cfg.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system run_sys{run_cfg};
  // The control system: CAF's middleman (the driver's connection) and the gate, which blocks
  // its thread while a run is set up (model load) or stopped (it waits for the run's actors).
  // Two threads, so that a blocked gate never holds up the middleman's deliveries; when idle
  // they sleep. (With the gate on the stages' scheduler, an extra thread there ran stages
  // too: with two loopback workers on 2 cores, 4 stage threads time-sliced the GEMMs.)
  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  cfg.set("scheduler.max-threads", size_t{2});
  cfg.set("scheduler.policy", caf::atom("sharing"));
  auto node = std::make_shared<WorkerNode>(std::move(*secret), options.max_message_bytes, run_sys);
  caf::actor_system sys{cfg};
  auto gate = sys.spawn(gate_actor, node);
  auto port = sys.middleman().publish(gate, options.listen.port, options.listen.host.c_str(),
                                      /*reuse_addr=*/true);
  if (!port) {
    std::fprintf(stderr, "muflow worker: cannot listen on %s:%d: %s\n", options.listen.host.c_str(),
                 options.listen.port, sys.render(port.error()).c_str());
    caf::anon_send_exit(gate, caf::exit_reason::user_shutdown);
    return 1;
  }
  std::printf("muflow worker: listening on %s:%d (pid %d)\n", options.listen.host.c_str(), *port,
              static_cast<int>(::getpid()));
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  spdlog::info(
      "muflow worker: signal {}: stopping ({} data-plane messages rejected, {} dropped that "
      "came after their run ended)",
      sig, node->rejected_frames.load(), node->late_frames.load());
  {
    std::lock_guard<std::mutex> lock(node->mu);  // a join may be replacing the plane
    if (const DataPlane* plane = node->plane.get()) {
      const transport::cluster::DataPlaneStats st = plane->stats();
      spdlog::info(
          "muflow worker: data plane (the driver's last attempt): {} messages sent ({} posted "
          "on their sender's thread), {} failed; {} received, {} abandoned with a peer that was "
          "dropped",
          st.sent_messages, st.posted_inline, st.failed_sends, st.received_messages,
          st.abandoned_receives);
    }
  }
  if (std::shared_ptr<HostedRun> run = take_run(*node)) stop_run(run_sys, *run);
  caf::anon_send_exit(gate, caf::exit_reason::user_shutdown);
  {
    std::lock_guard<std::mutex> lock(node->mu);
    node->plane_ptr.store(nullptr);
  }
  return 0;
}

}  // namespace muflow::actors::cluster
