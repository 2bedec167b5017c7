#pragma once
/// \file
/// A backend behind one interface (ARCHITECTURE.md §4): it loads what its executors need (the
/// prepared weights for real math, the dims and cost models for simulation), and gives each run
/// its per-device executors, the channel between devices and the clock. `cpu` (cpu.hpp) and
/// `sim` (sim.hpp) today; `cuda` fits the same interface.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/backends/sim_setup.hpp"
#include "engine/exec/cpu_model.hpp"
#include "engine/exec/executor.hpp"
#include "engine/model/model_config.hpp"
#include "engine/model/model_weights.hpp"
#include "engine/topology/topology.hpp"
#include "kernels/sim/precision.hpp"
#include "transport/channel.hpp"

namespace caf {
class actor_system_config;
}  // namespace caf

namespace muflow::actors {

class PreparedWiring;

/// One Server's backend. Created once (make_backend) and immutable afterwards: any thread.
class Backend {
 public:
  virtual ~Backend() = default;
  /// The topology's name for it (`backend = "..."`).
  virtual std::string_view name() const = 0;
  /// The clock: true = virtual time (CAF's deterministic test coordinator drives the run and
  /// stages finish after their modeled durations); false = real time.
  virtual bool virtual_time() const = 0;
  /// Sets the clock in an actor system's configuration before the system starts: CAF's
  /// deterministic test scheduler for virtual time (run on the calling thread), or worker
  /// threads for real time (one per device, at most the cores).
  virtual void configure_clock(caf::actor_system_config& cfg) const = 0;
  /// The model's dims.
  const engine::model::ModelConfig& config() const { return config_; }
  /// Real math: the weights as loaded, and (cpu_model) as prepared (prepacked GEMMs); null
  /// on backends without math.
  virtual std::shared_ptr<const engine::model::ModelWeights> weights() const { return nullptr; }
  /// Drops the backend's reference to the loaded weights once every user prepared its own
  /// copy (Server::create, after the wiring is prepared): the process then holds the model
  /// about once (prepacked), not twice. weights() returns null afterwards. Owner's thread.
  virtual void release_weights() {}
  virtual std::shared_ptr<const engine::exec::CpuModel> cpu_model() const { return nullptr; }
  /// Real math: threads each device's GEMMs use (`[cluster] threads_per_device`, resolved);
  /// 1 on backends without math.
  virtual int64_t gemm_threads_per_device() const { return 1; }
  /// Simulation: the router, cost and link models (planners read them); else null.
  virtual const SimSetup* sim() const { return nullptr; }
  /// Real backends: the sim device kind (kernels/sim/device_kind.hpp) whose datasheet rates
  /// stand for this backend's devices where a planner needs rates (HarMoEny's Eq. 4): "cpu"
  /// on cpu, the GPU's kind on cuda (e.g. "H200"); empty on sim, whose devices have kinds.
  virtual std::string rate_kind() const { return ""; }
  /// Precision the cost model charges ops at (`[model] dtype`).
  kernels::sim::Precision precision() const { return precision_; }

  /// One executor per device (indexed like topology.devices) for one run of `wiring`.
  virtual std::vector<std::shared_ptr<engine::exec::Executor>> make_executors(
      const PreparedWiring& wiring) const = 0;
  /// The channel of one run. `share_links_with`: a channel of a run colocated on the same
  /// devices whose links this one shares (null: fresh links). Errors: invalid link models.
  virtual absl::StatusOr<std::shared_ptr<transport::Channel>> make_channel(
      const transport::Channel* share_links_with) const = 0;
  /// KV-cache bytes an attention DP rank on `device` can hold when `experts_here` experts
  /// are resident there; -1 = unlimited (host memory).
  virtual int64_t kv_capacity_bytes(int64_t device, int64_t experts_here) const = 0;

 protected:
  engine::model::ModelConfig config_;
  kernels::sim::Precision precision_ = kernels::sim::Precision::kF32;
};

/// The clock of a real-time backend (cpu, cuda): CAF worker threads, one per device and at most
/// the cores, with work sharing (backend.cpp says why). Before the system starts.
void configure_real_time_clock(caf::actor_system_config& cfg, int64_t num_devices);

/// The backend `topology.backend` names, with its model loaded and checked against the
/// topology. Errors: Unimplemented for a backend this build lacks; the loaders' errors (file
/// and tensor named); InvalidArgument for a topology that does not fit the model.
absl::StatusOr<std::unique_ptr<Backend>> make_backend(const engine::topology::Topology& topology);

}  // namespace muflow::actors
