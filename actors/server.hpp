#pragma once
/// \file
/// The public C++ API of muflow: what a host application embeds and what the `muflow` CLI
/// uses. A Server holds one prepared model and its topology; each `run` builds the actor
/// wiring the topology names, serves the given requests through it and returns their outputs
/// and metrics.

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/backends/backend.hpp"
#include "actors/coordinator.hpp"
#include "actors/process_layout.hpp"
#include "actors/run_context.hpp"
#include "actors/wirings/registry.hpp"
#include "engine/exec/cpu_model.hpp"
#include "engine/model/tokenizer.hpp"
#include "engine/planning/placement.hpp"
#include "engine/serving/request.hpp"
#include "engine/topology/topology.hpp"

namespace muflow::actors {

/// A serving engine for one model on one cluster topology.
///
/// Thread safety: create and call from one host thread; `run` blocks that thread while the
/// actors (on CAF's worker threads) serve the requests. Callbacks run on an actor thread.
class Server {
 public:
  /// Loads the model the topology names (HF folder, or a synthetic model built in memory),
  /// its tokenizer if the folder has `tokenizer.model`, prepacks every GEMM and checks the
  /// placement. Errors: the loader's error (file and tensor named), InvalidArgument for a
  /// placement that does not fit the model or scheduler limits below 1, Unimplemented for a
  /// wiring or backend this build does not have.
  static absl::StatusOr<std::unique_ptr<Server>> create(engine::topology::Topology topology);

  const engine::topology::Topology& topology() const { return topology_; }
  const engine::model::ModelConfig& config() const { return backend_->config(); }
  /// The placement runs use: the topology's, with planned ones (affinity, capability) solved.
  const engine::planning::Placement& placement() const { return placement_; }
  /// The prepared weights (cpu backend); nullptr on the sim backend.
  std::shared_ptr<const engine::exec::CpuModel> model() const { return backend_->cpu_model(); }
  /// Threads each device's GEMMs use (cpu backend; `[cluster] threads_per_device` resolved).
  int64_t gemm_threads_per_device() const { return backend_->gemm_threads_per_device(); }
  /// Fresh executors of this server's backend, one per device, outside any run (calibration
  /// times stage kernels through them). Owner's thread. On cuda each owns a CUDA stream on its
  /// device's GPU (creating one that fails aborts, as CudaExecutor's constructor says).
  std::vector<std::shared_ptr<engine::exec::Executor>> make_executors() const;
  /// The sim device kind whose rates stand for this backend's devices (Backend::rate_kind).
  std::string rate_kind() const { return backend_->rate_kind(); }
  /// The sim backend's models (cost model, links, step overheads, calibration fit); null on
  /// other backends.
  const SimSetup* sim_setup() const { return backend_->sim(); }
  /// The model's tokenizer, or nullptr when the model has none (synthetic models).
  const engine::model::Tokenizer* tokenizer() const { return tokenizer_.get(); }

  /// The requests of the topology's [workload] (text prompts are encoded with the
  /// tokenizer). Errors: those of engine::serving::make_requests.
  absl::StatusOr<std::vector<engine::serving::Request>> make_workload() const;
  /// The same requests as a source that makes each one when the run takes it
  /// (engine::serving::make_request_source): a Poisson or trace workload then costs memory for
  /// the requests in flight only. Errors: those of make_request_source.
  absl::StatusOr<engine::serving::RequestSourcePtr> make_workload_source() const;

  /// Most events the trace recorder of later runs keeps (default 1,000,000; later events are
  /// counted as dropped: RunOutcome::num_trace_dropped_events, trace_warning). Values < 0
  /// count as 0.
  void set_trace_max_events(int64_t max_events) { trace_max_events_ = max_events; }
  int64_t trace_max_events() const { return trace_max_events_; }
  /// True: later runs of Server::run record a trace whether or not the topology names a trace
  /// file (which is still written when it does) and return it as RunOutcome::trace, for a
  /// host that reads the events itself (engine::trace::visit_recorded_events) instead of
  /// writing them as JSON and parsing that back (actors::calibrate). Recording costs the run
  /// host time, as a trace file does. Default false; a ServingEngine ignores it.
  void set_keep_trace(bool keep) { keep_trace_ = keep; }
  bool keep_trace() const { return keep_trace_; }

  /// Serves `requests` (arrival times in seconds from the start of this call) through the
  /// topology's wiring and blocks until all finished, or until `callbacks.stop_requested`
  /// returns true: then every unfinished request is cancelled and the run ends as usual with
  /// RunOutcome::stopped set. `callbacks.on_finish` sees each request as it finishes.
  /// Writes the Chrome trace when the topology names a trace file. Errors: InvalidArgument for ids
  /// that are not 0..n-1 in order, an empty prompt, a token outside the vocabulary, max_new_tokens
  /// < 1, a prompt of max_position_embeddings tokens or more, an arrival time that is not finite or
  /// outside [0, 1e7] s; Internal when a stage, the coordinator or a callback failed (the message
  /// says which); the trace writer's error. Generation also stops at max_position_embeddings.
  absl::StatusOr<RunOutcome> run(std::vector<engine::serving::Request> requests,
                                 RunCallbacks callbacks = {});

  /// As run() above, over requests taken from `source` as the clock reaches their arrival
  /// (ids 0, 1, ... in the source's order, which must be by arrival). Each request is checked
  /// when taken: one that fails (the errors above) fails the run there, after the requests
  /// before it were served and reported to `callbacks.on_finish`. With
  /// `callbacks.keep_outputs` false the run's memory stays bounded however many requests the
  /// source holds (RunOutcome::outputs is then empty). A stop cancels the requests that
  /// arrived; later ones are never made. Errors: as run(); InvalidArgument for a null source.
  absl::StatusOr<RunOutcome> run(engine::serving::RequestSourcePtr source,
                                 RunCallbacks callbacks = {});

  /// Serves this model's `mine` and `other`'s `theirs` together on one cluster (Aurora §6:
  /// two MoE models colocated): one device actor per device multiplexes both models' stages,
  /// on sim over one clock and one big-switch network. This topology's `[scheduler] policy`
  /// and batch-hold options and (sim) `[network]` links govern the shared devices; `other`'s
  /// are not used. Each model keeps its own wiring, placement, coordinator, metrics (busy time
  /// counts its own stages only), trace (the device busy counter is in this one's) and
  /// outputs.
  /// Which experts share a device is each topology's placement (`muflow plan --colocate`
  /// prints the bottleneck-matched one). Blocks like run(). Errors: as run() for either;
  /// InvalidArgument when the backends differ or the topologies do not declare the same
  /// devices (count, kinds and nodes, in order). `mine_callbacks` / `theirs_callbacks` as in
  /// run(); a stop_requested of either that returns true stops both models' requests.
  absl::StatusOr<std::pair<RunOutcome, RunOutcome>> run_colocated(
      Server& other, std::vector<engine::serving::Request> mine,
      std::vector<engine::serving::Request> theirs, RunCallbacks mine_callbacks = {},
      RunCallbacks theirs_callbacks = {});

  /// The worker processes of later runs on a topology with `[[cluster.workers]]` (#18):
  /// `actors/cluster`'s driver (cluster::make_cluster_driver) joins them and has each build
  /// its share. Without one such a topology's run fails with FailedPrecondition. Call before
  /// `run`, from the host thread.
  ///
  /// Such a run survives lost workers (#18 item 5): when the group loses a worker during the
  /// run (ProcessGroup::lost_workers; e.g. its process was killed), the run's attempt fails,
  /// the group hosts the lost worker's devices on the survivors (their weights from the model
  /// folder), and `run` starts another attempt that re-admits every request taken and not
  /// finished under its id, its prompt followed by the tokens it had generated (re-prefilled;
  /// batch-invariant kernels make the continuation the one a fault-free run gives), and then
  /// takes the requests yet to arrive. Callbacks see each request once, as if nothing had
  /// happened: on_token streams only new tokens, on_finish gets the whole output (original
  /// prompt, every token, prompt logits of the original prompt, times on the run's clock).
  /// RunOutcome::recoveries says what was lost and when. At most one attempt per worker, plus
  /// one; a failure for any other reason fails the run as before.
  void set_process_group(std::shared_ptr<ProcessGroup> group) { group_ = std::move(group); }

  /// A worker's share of a run that spans processes (#18), in the worker's actor system
  /// `sys`: builds the run's context (as the driver's: same topology, same placement) and
  /// spawns the devices `layout` hosts (device actors and stages); the coordinator, the
  /// collectives and the other processes' actors are `layout->remote(...)`. A trace of the
  /// hosted devices when `trace_max_events` >= 0 (a recorder with that cap, whatever the
  /// topology says: the driver decides, and writes the merged trace), none when -1; no routing
  /// record (the driver keeps it). The caller sets the context's `t0` when the run starts and
  /// stops its actors (ActorTable::for_each_wiring_actor) when it ends. Errors:
  /// FailedPrecondition on the sim backend; the context's and scheduling policy's errors.
  /// Any host thread.
  absl::StatusOr<std::shared_ptr<RunContext>> host_share(caf::actor_system& sys,
                                                         ProcessLayout& layout,
                                                         int64_t trace_max_events = -1) const;

 private:
  Server() = default;
  friend class ServingEngine;
  absl::Status validate(const std::vector<engine::serving::Request>& requests) const;
  // Checks `requests` (ids 0..n-1 in order, each valid), sorts them by (arrival, id) and wraps
  // them as a source the coordinator takes without checking again.
  absl::StatusOr<SourceSubmissionPtr> checked_source(
      std::vector<engine::serving::Request> requests) const;
  // One request's prompt, lengths, arrival time and options (not its id).
  absl::Status validate_request(const engine::serving::Request& r) const;
  // A run's context: executors, network, placement, trace, recorders (no actors yet).
  // `share_links_with`: the channel of a colocated run whose links this one shares (or null).
  // `keep_trace`: record a trace even when the topology names no trace file.
  absl::StatusOr<std::shared_ptr<RunContext>> make_context(
      const transport::Channel* share_links_with = nullptr, bool keep_trace = false) const;
  // Writes the run's routing record and trace.
  absl::Status finish_run(const RunContext& ctx, const RunOutcome& outcome) const;
  // Runs `servers` together on one actor system and one set of device actors. `started`
  // (optional) gets the run clock's origin once the coordinators exist.
  static absl::StatusOr<std::vector<RunOutcome>> run_together(
      const std::vector<Server*>& servers, std::vector<SourceSubmissionPtr> sources,
      std::vector<RunCallbacks> callbacks,
      std::chrono::steady_clock::time_point* started = nullptr);
  // A run across processes that recovers from lost workers (set_process_group; defined in
  // server_recovery.cpp).
  absl::StatusOr<RunOutcome> run_recovering(SourceSubmissionPtr sub, RunCallbacks callbacks);

  engine::topology::Topology topology_;
  std::unique_ptr<Backend> backend_;              // executors, channel, clock; the model
  std::shared_ptr<const PreparedWiring> wiring_;  // the topology's wiring, prepared once
  engine::planning::Placement placement_;         // planned once, at create
  std::unique_ptr<engine::model::Tokenizer> tokenizer_;
  int64_t trace_max_events_ = 1'000'000;  // the trace recorder's cap for later runs
  bool keep_trace_ = false;               // set_keep_trace
  std::shared_ptr<ProcessGroup> group_;   // the workers of a topology's [[cluster.workers]]
};

}  // namespace muflow::actors
