#pragma once
/// \file
/// What every actor of one run shares: the model, the executors, the wiring table (actor
/// handles), sampling, and the recorders. Filled by Server::run before the coordinator starts
/// and immutable afterwards (happens-before through the start message), so actors read it
/// freely. What the pointers point to may change: the trace and routing recorders are
/// thread-safe; each executor is used by its own device's stages only; the sim network is
/// mutated by collectives of a single-threaded virtual-time run only.

#include <array>
#include <caf/all.hpp>
#include <cstdint>
#include <memory>
#include <vector>

#include "actors/busy_log.hpp"
#include "actors/device_gate.hpp"
#include "actors/request_sampling.hpp"
#include "actors/wiring_graph.hpp"
#include "engine/exec/cpu_model.hpp"
#include "engine/exec/executor.hpp"
#include "engine/planning/placement.hpp"
#include "engine/routing/routing_record.hpp"
#include "engine/topology/topology.hpp"
#include "engine/trace/trace.hpp"
#include "transport/channel.hpp"

namespace muflow::actors {

/// Actor handles of one run, indexed like the model: [block][rank], [block][expert], ...
struct ActorTable {
  std::vector<caf::actor> devices;                 ///< [num_devices]
  /// [num_devices] each device actor's gate (actors/device_gate.hpp), null for a device of
  /// another process; read by that device's stage actors.
  std::vector<std::shared_ptr<DeviceGate>> device_gates;
  std::vector<std::vector<caf::actor>> attention;  ///< [num_layers][num_ranks]
  std::vector<caf::actor> samplers;                ///< [num_ranks]
  /// [num_layers][num expert slots]: the slots of WiringGraph::slot_device (per expert, or
  /// per device, as the wiring cut them).
  std::vector<std::vector<caf::actor>> experts;
  std::vector<caf::actor> dispatch;  ///< [num_layers] barrier dispatch edges (else empty)
  std::vector<caf::actor> combine;   ///< [num_layers] barrier combine edges (else empty)
  caf::actor coordinator;

  /// Calls `fn(const caf::actor&)` for every actor of the wiring except the coordinator
  /// (stages, collectives, devices), skipping empty handles.
  template <typename Fn>
  void for_each_wiring_actor(Fn&& fn) const {
    auto visit = [&](const caf::actor& a) {
      if (a) fn(a);
    };
    for (const auto& v : attention)
      for (const auto& a : v) visit(a);
    for (const auto& v : experts)
      for (const auto& a : v) visit(a);
    for (const auto& a : samplers) visit(a);
    for (const auto& a : dispatch) visit(a);
    for (const auto& a : combine) visit(a);
    for (const auto& a : devices) visit(a);
  }
};

/// Where a stage actor lives: its device and its thread id in traces (its local index).
struct StageSite {
  int64_t device = 0;
  int64_t tid = 0;
};

/// Sites of every stage, indexed like ActorTable (filled by the wiring builder).
struct SiteTable {
  std::vector<std::vector<StageSite>> attention;  ///< [num_layers][num_ranks]
  std::vector<std::vector<StageSite>> experts;    ///< [num_layers][num expert slots]
  std::vector<StageSite> samplers;                ///< [num_ranks]
};

/// Trace thread id of the lane that shows time spent waiting in collectives.
inline constexpr int64_t kWaitLaneTid = 10000;

/// Shared, read-only state of one run.
struct RunContext {
  engine::model::ModelConfig config;                    ///< the model's dims (every backend)
  std::shared_ptr<const engine::exec::CpuModel> model;  ///< cpu backend: the prepared weights
  /// One executor per device (owned here; each used only by that device's stages).
  std::vector<std::shared_ptr<engine::exec::Executor>> executors;
  engine::topology::Topology topology;
  engine::planning::Placement placement;
  int64_t num_ranks = 0;  ///< attention DP ranks (rank r on placement.rank_device[r])
  /// The run's wiring: its graph (edges, merge rules, expert slots) and what it plugs into
  /// the generic stages (actors/wiring_graph.hpp). Set before any actor is spawned.
  std::shared_ptr<const WiringRun> wiring;
  /// Per DP rank: KV-cache bytes it can hold (-1 = unlimited) and per token; the
  /// coordinator's admission reads them (engine/serving/kv_admission.hpp).
  std::vector<int64_t> kv_capacity_bytes;
  int64_t kv_bytes_per_token = 0;
  ActorTable actors;
  SiteTable sites;
  std::shared_ptr<engine::trace::TraceRecorder> trace;  ///< may be null (tracing off)
  std::shared_ptr<engine::routing::RoutingRecorder>
      routing;                      ///< may be null (not recording routing)
  caf::actor_clock::time_point t0;  ///< run start; times are seconds since t0
  /// The coordinator's log of busy intervals when it runs in this process (set before it is
  /// spawned; actors/busy_log.hpp); null where it is in another process (a worker's run),
  /// where stages send `busy` messages instead.
  std::shared_ptr<BusyLog> busy_log;
  bool virtual_time = false;        ///< sim backend: stages complete after their modeled duration
  /// Sim: [device][StageKind] host seconds added to each stage run's modeled duration
  /// (`[cost]` overheads of the device's kind for that stage type); empty = none.
  std::vector<std::array<double, 3>> step_overhead_s;
  /// Sparse iterations (#19 item 6): the run is in one process and its graph's ranks are
  /// independent (WiringGraph::ranks_independent), so the coordinator launches an iteration on
  /// the DP ranks with tokens only and tells every collective which ranks take part
  /// (`ranks_atom`); a collective counts an absent rank as an empty contribution (dispatch)
  /// and delivers nothing to it (combine). The rules see the same contributions as when every
  /// rank ran, so the tokens are the same; an idle rank of a 1,024-device run costs no
  /// message and no stage run (a barrier still walks every source slot). Set by build_stages
  /// before the collectives and the coordinator are spawned (stages never read it).
  bool sparse_iterations = false;
  /// A ServingEngine's run (serves until shutdown): the coordinator compacts its metrics
  /// recorder as requests finish, so memory does not grow with the requests served.
  bool long_lived = false;
  /// The channel between devices, from the backend: in-process handoff (cpu), the big-switch
  /// network in virtual time (sim: used only from actors of a single-threaded run).
  std::shared_ptr<transport::Channel> channel;
  int64_t activation_bytes = 2;  ///< bytes per activation element on the wire (sim charges)
  /// Requests whose sampling overrides the topology's (the coordinator writes it, sampler
  /// stages read it; thread-safe).
  std::shared_ptr<RequestSamplingTable> request_sampling = std::make_shared<RequestSamplingTable>();

  /// The wiring's graph (ctx.wiring must be set).
  const WiringGraph& graph() const { return wiring->graph(); }

  /// Seconds from the run's start to `t` (a time of the actor clock: real or virtual).
  double seconds_since_start(caf::actor_clock::time_point t) const {
    return std::chrono::duration<double>(t - t0).count();
  }
};

}  // namespace muflow::actors
