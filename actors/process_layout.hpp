#pragma once
/// \file
/// Runs that span processes (#18): how an actor of the wiring is named across processes
/// (`ActorAddress`), which of them this process spawns (`ProcessLayout`), and the hooks a
/// driver's run calls to have its workers build and tear down their share (`ProcessGroup`).
/// Implemented by actors/cluster (UCX data plane, CAF middleman); nothing here knows about
/// either, so the single-process engine does not depend on them.

#include <caf/all.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace muflow::actors {

struct ActorTable;
struct RunContext;

/// Which entry of an `ActorTable` an address names. The numbers are part of the data-plane
/// wire format (actors/cluster/actor_codec.hpp): never reuse one.
enum class ActorRole : uint8_t {
  kCoordinator = 1,
  kAttention = 2,  ///< attention[block][index]: index = DP rank
  kExpert = 3,     ///< experts[block][index]: index = expert slot
  kSampler = 4,    ///< samplers[index]: index = DP rank
  kDispatch = 5,   ///< dispatch[block]
  kCombine = 6,    ///< combine[block]
  kDevice = 7,     ///< devices[index]: index = device
};

/// An actor of one run, named the same way in every process of it (the processes build the
/// same wiring from the same topology).
struct ActorAddress {
  ActorRole role = ActorRole::kCoordinator;
  int32_t block = 0;  ///< attention, expert, dispatch, combine; 0 otherwise
  int32_t index = 0;  ///< rank, slot or device; 0 for the coordinator and collectives
  friend bool operator==(const ActorAddress&, const ActorAddress&) = default;
};

/// "attention(b=1, r=0)", "coordinator", ... for log lines. Any thread.
std::string to_string(const ActorAddress& address);

/// The handle at `address` in `table`, or an empty handle when the address is outside the
/// table (a role this wiring does not have, a block, rank, slot or device out of range).
/// Reads `table` only; any thread once the table is built.
caf::actor resolve(const ActorTable& table, const ActorAddress& address);

/// Which actors of a run this process spawns; the others are handles that carry messages to
/// the process that has them (`remote`). Read by the graph builder before the coordinator
/// starts; implementations are used from that thread only until then.
class ProcessLayout {
 public:
  virtual ~ProcessLayout() = default;
  /// True when this process runs device `device`: its device actor and every stage placed on
  /// it.
  virtual bool hosts_device(int64_t device) const = 0;
  /// True when this process runs the coordinator (the driver).
  virtual bool hosts_driver() const = 0;
  /// This process's index in the run (0: the driver).
  virtual uint32_t self() const = 0;
  /// The index of the process that runs device `device` (0 for -1: the driver's actors).
  virtual uint32_t process_of(int64_t device) const = 0;
  /// A handle for the actor at `address` in another process: what is sent to it is encoded
  /// and carried to that process, which delivers it to its actor there. `device`: the device
  /// the actor runs on; -1 for the coordinator.
  caf::actor remote(const ActorAddress& address, int64_t device) {
    return remote_in(address, process_of(device));
  }
  /// A handle for the actor at `address` in process `process` (a barrier collective's replica
  /// there: graph_builder.hpp, `place_collective`).
  virtual caf::actor remote_in(const ActorAddress& address, uint32_t process) = 0;
};

/// What the stages of a run hold now (ServingEngine::stats and kv_cache_bytes): KV-cache bytes
/// of the attention stages and tokens waiting in the μ-queues, per stage kind.
struct StageLoad {
  int64_t kv_bytes = 0;
  int64_t queued_attention_tokens = 0, queued_expert_tokens = 0, queued_sampler_tokens = 0;
  StageLoad& operator+=(const StageLoad& o) {
    kv_bytes += o.kv_bytes;
    queued_attention_tokens += o.queued_attention_tokens;
    queued_expert_tokens += o.queued_expert_tokens;
    queued_sampler_tokens += o.queued_sampler_tokens;
    return *this;
  }
};

/// The worker processes of a driver's run (Server::run on a topology with
/// `[[cluster.workers]]`). Server calls, from its run thread, in this order: `configure`
/// (before the actor system exists), `open` (once the run's context exists, before any actor
/// is spawned), `start` (once this process spawned its share, before the coordinator gets
/// work) and `close` (after the run, also after a failed one; must not fail).
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  /// Adds what the group needs to the driver's actor system config (CAF's middleman).
  virtual void configure(caf::actor_system_config& cfg) = 0;
  /// Reaches every worker (handshake with the cluster secret), has each build its share of
  /// the run from the same topology, and returns the layout this process builds with (owned
  /// by the group, valid until `close`). Errors name the worker.
  virtual absl::StatusOr<ProcessLayout*> open(caf::actor_system& sys,
                                              const std::shared_ptr<RunContext>& ctx) = 0;
  /// Tells every worker the run starts (each sets its clock's origin).
  virtual absl::Status start() = 0;
  /// After the run's actors in this process are done (and only when the run succeeded):
  /// stops the workers' share of the run and merges what they recorded into `ctx` (their
  /// devices' trace events, moved to this process's clock, when `ctx.trace` is set), so that
  /// the run's trace covers every process. Errors: a worker that does not answer or sends a
  /// trace that does not parse, named (the run's outputs are not affected: the caller may
  /// warn and go on). The default does nothing.
  virtual absl::Status finish(RunContext& ctx) {
    (void)ctx;
    return absl::OkStatus();
  }
  /// Stops the workers' actors of this run (unless `finish` did) and forgets it; the workers
  /// keep serving.
  virtual void close() = 0;

  /// While a run is started: what the stages the workers host hold now, summed over the live
  /// workers (one control-plane round trip each). Errors: a worker that does not answer within
  /// `timeout`, named; FailedPrecondition when no run is started. The default (no workers)
  /// holds nothing. From the run's host threads, one call at a time.
  virtual absl::StatusOr<StageLoad> stage_load(std::chrono::milliseconds timeout) {
    (void)timeout;
    return StageLoad{};
  }

  /// A worker the group lost (its process died or its connection broke).
  struct LostWorker {
    uint32_t process = 0;     ///< its process index (worker i = process i + 1)
    std::string description;  ///< "worker 127.0.0.1:7101 (process 2)" and the reason
    std::chrono::steady_clock::time_point detected;  ///< when the group noticed
  };
  /// Every worker lost since the group was made, in the order they were lost. A group that
  /// loses a worker during a run makes that run fail (the lost worker's remote handles stop,
  /// so the coordinator ends the run), and hosts its devices on the survivors in later runs
  /// (Server::run then re-admits the run's unfinished requests: server.hpp). Any thread.
  virtual std::vector<LostWorker> lost_workers() const = 0;

  /// A lost worker that answered again: a process at its address proved the cluster secret
  /// (a restarted worker, or a hung one that resumed).
  struct ReturnedWorker {
    uint32_t process = 0;     ///< its process index, as when it was lost
    std::string description;  ///< "worker 127.0.0.1:7101 (process 2) answers again"
    std::chrono::steady_clock::time_point detected;  ///< when the group reached it
  };
  /// Every lost worker that came back since the group was made, in the order they came back
  /// (a worker lost and back twice is listed twice). While a run is started the group tries to
  /// reach its lost workers (ClusterDriverOptions::rejoin_interval); one that answers hosts its
  /// own devices again from the group's next `open`, not in the run started now (a
  /// ServingEngine replaces its wiring at once to take it back; Server::run at its next run or
  /// attempt).
  /// The default (no workers) has none. Any thread.
  virtual std::vector<ReturnedWorker> returned_workers() const { return {}; }
};

}  // namespace muflow::actors
