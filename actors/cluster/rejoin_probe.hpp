#pragma once
/// \file
/// The driver's tries to reach a lost worker again (#18 item 5, rejoin), run by its gate
/// watcher (cluster_driver.cpp) every ClusterDriverOptions::rejoin_interval while a run is
/// started. One try: (1) a TCP connect bounded by `check` (tcp_probe.hpp) on the `checker`
/// actor's own thread, because CAF's middleman connects with a blocking connect(2) on its
/// thread, which a host that drops packets holds for the kernel's SYN timeout (~2 min) with
/// every later middleman request and the actor system's shutdown behind it; (2) only for an
/// address that accepts, CAF's middleman connects (at most one request per worker at a time);
/// (3) the cluster secret's challenge-response both ways, as in a join (driver_link.hpp). A
/// worker that proves the secret is recorded in `LostState::returned` and `returned_list`; a
/// refusal or a failed proof is logged once per distinct reason.

#include <caf/all.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/cluster/listen_address.hpp"
#include "actors/cluster/lost_workers.hpp"
#include "transport/cluster/cluster_secret.hpp"

namespace muflow::actors::cluster {

/// What the watcher tries, and how long each step may take.
struct RejoinPlan {
  std::chrono::milliseconds interval{0};  ///< between tries; 0: no tries
  std::chrono::milliseconds timeout{0};   ///< per handshake step (join_timeout)
  struct Worker {
    uint32_t process = 0;  ///< worker i = process i + 1
    std::string name;      ///< "worker HOST:PORT (process N)", for the log
    ListenAddress address;
  };
  std::vector<Worker> workers;  ///< every worker of the group
  std::shared_ptr<const transport::cluster::ClusterSecret> secret;
};

/// The bound of a try's TCP check: `plan.timeout`, at most 1 s.
std::chrono::milliseconds tcp_check_bound(const RejoinPlan& plan);

/// The `checker` actor's behavior: answers (rejoin_atom, host, port) with tcp_accepts(host,
/// port, bound). Spawn it detached (it blocks its thread for up to `bound` per question).
caf::behavior tcp_checker(caf::event_based_actor* self, std::chrono::milliseconds bound);

/// What the watcher knows of its tries, by process index: one under way (a slow try is not
/// started twice) and the last refusal logged. Used from the watcher's handlers only.
struct Probes {
  explicit Probes(size_t processes) : under_way(processes, false), logged(processes) {}
  std::vector<bool> under_way;
  std::vector<std::string> logged;
};

/// Starts one try to reach lost worker `w` again from the watcher `self` (asynchronous: its
/// steps are response handlers of `self`; sets `probes->under_way[w.process]` until the try
/// ends). `w.process` must be below the size `probes` was made with.
void probe_lost_worker(caf::event_based_actor* self, const caf::actor& checker,
                       const RejoinPlan::Worker& w, const RejoinPlan& plan,
                       const std::shared_ptr<LostState>& lost,
                       const std::shared_ptr<Probes>& probes);

}  // namespace muflow::actors::cluster
