#include "actors/cluster/rejoin_probe.hpp"

#include <caf/io/all.hpp>
#include <set>

#include "absl/strings/str_format.h"
#include "actors/cluster/control_messages.hpp"
#include "actors/cluster/driver_link.hpp"
#include "actors/cluster/tcp_probe.hpp"
#include "spdlog/spdlog.h"

namespace muflow::actors::cluster {

std::chrono::milliseconds tcp_check_bound(const RejoinPlan& plan) {
  return std::min(plan.timeout, std::chrono::milliseconds(1000));
}

// An argument keeps CAF 0.17 from spawning it with an empty argument tuple, which it
// dereferences (UBSan).
caf::behavior tcp_checker(caf::event_based_actor* self, std::chrono::milliseconds bound) {
  (void)self;
  return {
      [bound](rejoin_atom, const std::string& host, uint16_t port) -> bool {
        return tcp_accepts(host, port, bound);
      },
  };
}

namespace {

// One try's state, shared by its steps (each a response handler of the watcher).
struct Try {
  caf::event_based_actor* self = nullptr;
  RejoinPlan::Worker w;
  std::chrono::milliseconds timeout{0};
  std::shared_ptr<const transport::cluster::ClusterSecret> secret;
  std::shared_ptr<LostState> lost;
  std::shared_ptr<Probes> probes;

  void done() const { probes->under_way[w.process] = false; }
  // A refusal, logged when it is not the one logged last for this worker.
  void refused(const std::string& why) const {
    done();
    if (probes->logged[w.process] == why) return;
    probes->logged[w.process] = why;
    spdlog::error("muflow driver: {} (logged once until it changes; tried again meanwhile)", why);
  }
};
using TryPtr = std::shared_ptr<const Try>;

// Still lost (no answer, refused connection, timeout): tried again at a later interval.
auto still_lost(const TryPtr& t) {
  return [t](const caf::error&) { t->done(); };
}

// (3b) The worker's proof of the secret, for the driver's nonce.
void check_proof(const TryPtr& t, const AuthAnswer& mine, const std::string& proof) {
  if (!worker_proved(*t->secret, mine, proof)) {
    return t->refused(t->w.name +
                      " answers but failed to prove the cluster secret: not taken back");
  }
  t->done();
  t->probes->logged[t->w.process].clear();
  ProcessGroup::ReturnedWorker r;
  r.process = t->w.process;
  r.description = t->w.name + " answers again";
  r.detected = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(t->lost->mu);
    if (t->lost->processes.count(r.process) == 0 || !t->lost->returned.insert(r.process).second) {
      return;
    }
    t->lost->returned_list.push_back(r);
  }
  spdlog::warn("muflow driver: {}; it hosts its devices again from the next run", r.description);
}

// (3a) The gate's challenge: answer it with the driver's proof and nonce.
void answer(const TryPtr& t, const caf::actor& gate, const std::string& challenge) {
  absl::StatusOr<AuthAnswer> mine = answer_challenge(*t->secret, challenge, t->w.name);
  if (!mine.ok()) {
    return t->refused(absl::StrFormat("%s answers but is not taken back: %s", t->w.name,
                                      mine.status().message()));
  }
  t->self
      ->request(gate, t->timeout, auth_atom::value, mine->proof,
                std::string(mine->nonce.begin(), mine->nonce.end()))
      .then([t, mine = *mine](const std::string& proof) { check_proof(t, mine, proof); },
            [t](const caf::error& err) {  // refused: another token (the gate logs it too)
              t->refused(absl::StrFormat("%s answers but refused this driver: %s", t->w.name,
                                         t->self->home_system().render(err)));
            });
}

// (2) The middleman's connection to an address that accepts TCP; then the gate's hello.
void connect(const TryPtr& t) {
  // Waited for as long as the middleman's connect(2) may take (the kernel's SYN timeout), so
  // that no second request for this worker queues behind a first.
  t->self
      ->request(t->self->home_system().middleman().actor_handle(), std::chrono::minutes(5),
                caf::connect_atom::value, t->w.address.host, t->w.address.port)
      .then(
          [t](const caf::node_id&, const caf::strong_actor_ptr& ptr, const std::set<std::string>&) {
            const auto gate = caf::actor_cast<caf::actor>(ptr);
            if (!gate) return t->done();
            t->self->request(gate, t->timeout, hello_atom::value)
                .then([t, gate](const std::string& challenge) { answer(t, gate, challenge); },
                      still_lost(t));
          },
          still_lost(t));
}

}  // namespace

void probe_lost_worker(caf::event_based_actor* self, const caf::actor& checker,
                       const RejoinPlan::Worker& w, const RejoinPlan& plan,
                       const std::shared_ptr<LostState>& lost,
                       const std::shared_ptr<Probes>& probes) {
  probes->under_way[w.process] = true;
  auto t = std::make_shared<const Try>(Try{self, w, plan.timeout, plan.secret, lost, probes});
  // (1) The bounded TCP check, on the checker's thread.
  self->request(checker, tcp_check_bound(plan) + std::chrono::seconds(2), rejoin_atom::value,
                w.address.host, w.address.port)
      .then(
          [t](bool accepts) {
            if (!accepts) return t->done();
            connect(t);
          },
          still_lost(t));
}

}  // namespace muflow::actors::cluster
