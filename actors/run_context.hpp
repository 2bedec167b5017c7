#pragma once
/// \file
/// What every actor of one run shares: the model, the executors, the wiring table (actor
/// handles), sampling, and the recorders. Filled by Server::run before the coordinator starts
/// and immutable afterwards (happens-before through the start message), so actors read it
/// freely. What the pointers point to may change: the trace and routing recorders are
/// thread-safe; each executor is used by its own device's stages only; the sim network is
/// mutated by collectives of a single-threaded virtual-time run only.

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <caf/all.hpp>

#include "engine/cpu_expert_slots.hpp"
#include "engine/cpu_model.hpp"
#include "engine/kv_cache.hpp"
#include "engine/executor.hpp"
#include "engine/placement.hpp"
#include "engine/topology.hpp"
#include "engine/routing_record.hpp"
#include "engine/trace.hpp"
#include "transport/aurora_order.hpp"
#include "transport/big_switch_network.hpp"

namespace muflow::actors {

/// One attention layer's KV cache with the lock its users take around every call. A stage
/// owns one alone, or (`exflow`) all DP ranks' stages of a block share one: ExFlow keeps the
/// replicas coherent with all-gathers; in one process the replicas are one object, and the
/// mutex serialises the ranks' attention calls on it (the barrier pacing guarantees that a
/// request's rows of one block are appended by one stage per iteration, in position order).
struct SharedKvCache {
  explicit SharedKvCache(int64_t kv_width) : cache(kv_width) {}
  std::mutex mutex;
  engine::KvCache cache;
};

/// Actor handles of one run, indexed like the model: [block][rank], [block][expert], ...
struct ActorTable {
  std::vector<caf::actor> devices;                  ///< [num_devices]
  std::vector<std::vector<caf::actor>> attention;   ///< [num_layers][num_ranks]
  std::vector<caf::actor> samplers;                 ///< [num_ranks]
  /// [num_layers][num expert slots]: per expert (sync, async) or per device (harmoeny,
  /// moeshard); see RunContext::expert_slot_device.
  std::vector<std::vector<caf::actor>> experts;
  std::vector<caf::actor> dispatch;                 ///< [num_layers] (sync wiring)
  std::vector<caf::actor> combine;                  ///< [num_layers] (sync wiring)
  caf::actor coordinator;

  /// Calls `fn(const caf::actor&)` for every actor of the wiring except the coordinator
  /// (stages, collectives, devices), skipping empty handles.
  template <typename Fn>
  void for_each_wiring_actor(Fn&& fn) const {
    auto visit = [&](const caf::actor& a) {
      if (a) fn(a);
    };
    for (const auto& v : attention) for (const auto& a : v) visit(a);
    for (const auto& v : experts) for (const auto& a : v) visit(a);
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

/// How a block's expert stages are cut.
enum class ExpertMode {
  kPerExpert,  ///< one stage per expert on its placement device (sync, async)
  kHarmoeny,   ///< one stage per device running the experts the HarMoEny schedule sends it
  kMoeShard,   ///< one stage per device running its shard of every expert (MoEShard)
};

/// The `harmoeny` wiring's resolved options (engine::HarmoenySpec with defaults filled in).
struct HarmoenyParams {
  int64_t q = 150;            ///< token transfer threshold, tokens
  bool paper = true;          ///< Algorithm 2 (true) or the public code's variant
  int64_t slots = 0;          ///< expert slots per device
  bool prefetch = true;       ///< asynchronous copies into freed slots
  /// [num_devices] seconds to copy one expert's weights from host memory (sim: the host
  /// link model; cpu: 0, the weights are already in memory).
  std::vector<double> copy_s;
};

/// Shared, read-only state of one run.
struct RunContext {
  engine::ModelConfig config;                    ///< the model's dims (every backend)
  std::shared_ptr<const engine::CpuModel> model;  ///< cpu backend: the prepared weights
  /// One executor per device (owned here; each used only by that device's stages).
  std::vector<std::shared_ptr<engine::Executor>> executors;
  engine::Topology topology;
  engine::Placement placement;
  int64_t num_ranks = 0;       ///< attention DP ranks (rank r on placement.rank_device[r])
  /// Barrier-free wiring (`async`): stages send token batches point to point to the next
  /// stage and take per-request-ready tokens from their μ-queues, up to max_batch_tokens;
  /// false: barrier collectives (sync).
  bool point_to_point = false;
  int64_t max_batch_tokens = 512;  ///< point_to_point: most tokens per stage run
  ExpertMode expert_mode = ExpertMode::kPerExpert;
  /// [num expert slots] device of expert stage slot s of every block: expert_device[s] per
  /// expert, or s itself for per-device modes. With an affinity placement the device differs
  /// per block: ask `placement.device_of(block, s)` or `sites.experts[block][s]`.
  std::vector<int64_t> expert_slot_device;
  HarmoenyParams harmoeny;  ///< kHarmoeny only
  /// kHarmoeny on the cpu backend: each device's expert slots and copy worker (empty on sim,
  /// which models the copies instead).
  std::vector<std::shared_ptr<engine::CpuExpertSlots>> expert_slots;
  /// `exflow` (ExFlow §IV-A, context-coherent EP): every DP rank sees every request's KV
  /// cache, so a request with one token in the batch (a decode step, or a one-token prefill
  /// chunk) continues (next attention, or the sampler) on the rank of the device that ran its
  /// top-1 expert instead of returning to its home rank; a request with several tokens in the
  /// batch stays home, since its tokens attend to each other within the block. The combine
  /// then only moves the other top-k outputs. Costs: every rank sends every rank a residual
  /// batch per block and iteration (R² messages, most empty), and the shared KV cache's lock
  /// serialises the ranks' attention of a block on the cpu backend.
  bool context_coherent = false;
  /// context_coherent: [num_devices] the DP rank on each device (-1: none).
  std::vector<int64_t> rank_of_device;
  /// context_coherent: [num_layers] the one KV cache of each block that all its attention
  /// stages share (null entries otherwise: each stage owns its cache).
  std::vector<std::shared_ptr<SharedKvCache>> shared_kv;
  /// Per DP rank: KV-cache bytes it can hold (-1 = unlimited) and per token; the
  /// coordinator's admission reads them (engine/kv_admission.hpp).
  std::vector<int64_t> kv_capacity_bytes;
  int64_t kv_bytes_per_token = 0;
  ActorTable actors;
  SiteTable sites;
  std::shared_ptr<engine::TraceRecorder> trace;  ///< may be null (tracing off)
  std::shared_ptr<engine::RoutingRecorder> routing;  ///< may be null (not recording routing)
  caf::actor_clock::time_point t0;               ///< run start; times are seconds since t0
  bool virtual_time = false;  ///< sim backend: stages complete after their modeled duration
  /// sim backend: the big-switch network all collectives schedule their transfers on (owned
  /// here, used only from actors of a single-threaded virtual-time run); null on cpu.
  std::shared_ptr<transport::BigSwitchNetwork> network;
  int64_t activation_bytes = 2;  ///< sim: bytes per activation element on the wire
  /// sim: order of each barrier all-to-all's device-to-device transfers (`[network] a2a_order`)
  transport::A2aOrder a2a_order = transport::A2aOrder::kRowMajor;
  uint64_t a2a_seed = 0;  ///< sim, a2a_order = random: mixed with (block, iteration, kind)

  /// Seconds from the run's start to `t` (a time of the actor clock: real or virtual).
  double seconds_since_start(caf::actor_clock::time_point t) const {
    return std::chrono::duration<double>(t - t0).count();
  }
};
using RunContextPtr = std::shared_ptr<const RunContext>;

}  // namespace muflow::actors
