#include "actors/cluster/worker.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "absl/strings/str_format.h"
#include "actors/cluster/control_messages.hpp"
#include "actors/cluster/frame_kinds.hpp"
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

// What the gate actor and the data plane's progress thread share.
struct WorkerNode {
  explicit WorkerNode(ClusterSecret s, int64_t max_bytes)
      : secret(std::move(s)), max_message_bytes(max_bytes) {}
  const ClusterSecret secret;
  const int64_t max_message_bytes;
  std::mutex mu;                     // guards plane's creation
  std::unique_ptr<DataPlane> plane;  // created by the first join
  std::atomic<DataPlane*> plane_ptr{nullptr};
  std::atomic<uint64_t> rejected_frames{0};
};

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
      transport::cluster::FramePrefix p = frame->prefix;
      p.kind = static_cast<uint16_t>(FrameKind::kPong);
      p.source = plane->options().process;
      plane->send(frame->prefix.source,
                  {transport::cluster::encode_frame_prefix(p),
                   std::vector<char>(frame->header.begin(), frame->header.end()),
                   std::vector<char>(frame->payload.begin(), frame->payload.end())});
      return;
    }
    default:
      return reject(absl::StrFormat("unknown frame kind %d", frame->prefix.kind));
  }
}

struct GateState {
  std::shared_ptr<WorkerNode> node;
  std::map<caf::node_id, Nonce> challenges;  // outstanding, one per driver node
  std::set<caf::node_id> authenticated;
  static inline const char* name = "muflow-worker-gate";
};

std::string bytes_of(const Nonce& n) { return std::string(n.begin(), n.end()); }

caf::behavior gate_actor(caf::stateful_actor<GateState>* self, std::shared_ptr<WorkerNode> node) {
  self->state.node = std::move(node);
  auto sender_node = [self]() -> caf::node_id {
    const auto& s = self->current_sender();
    return s ? s->node() : caf::node_id{};
  };
  auto refuse = [self](const caf::node_id& from, const std::string& why) {
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
        if (!node.plane) {
          DataPlane::Options o;
          o.process = process;
          o.max_message_bytes = node.max_message_bytes;
          o.name = absl::StrFormat("worker %d data plane", process);
          auto plane = DataPlane::create(
              o, [n = self->state.node](Received&& r) { on_message(*n, std::move(r)); });
          if (!plane.ok()) return refuse(from, std::string(plane.status().message()));
          node.plane = std::move(*plane);
          node.plane_ptr.store(node.plane.get(), std::memory_order_release);
        }
        auto st = node.plane->connect(0, {driver_address.data(), driver_address.size()});
        if (!st.ok()) return refuse(from, std::string(st.message()));
        spdlog::info("muflow worker: joined the data plane as process {}", process);
        const auto& a = node.plane->address();
        return std::string(a.begin(), a.end());
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

  auto node = std::make_shared<WorkerNode>(std::move(*secret), options.max_message_bytes);
  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  cfg.set("scheduler.max-threads", 2);
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
  spdlog::info("muflow worker: signal {}: stopping ({} data-plane messages rejected)", sig,
               node->rejected_frames.load());
  caf::anon_send_exit(gate, caf::exit_reason::user_shutdown);
  {
    std::lock_guard<std::mutex> lock(node->mu);
    node->plane_ptr.store(nullptr);
  }
  return 0;
}

}  // namespace muflow::actors::cluster
