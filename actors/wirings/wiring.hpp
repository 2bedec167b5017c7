#pragma once
/// \file
/// What a wiring is to the rest of muflow: a named builder of WiringGraphs. A wiring is
/// prepared once per Server (its private parameters resolved, e.g. HarMoEny's q and slots,
/// MoEShard's weight shards) and starts one WiringRun per run (per-run state, e.g. exflow's
/// per-block KV caches, HarMoEny's cpu expert slots). The registry (registry.hpp) maps the
/// topology's `wiring = "..."` to one.

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "actors/backends/sim_setup.hpp"
#include "actors/run_context.hpp"
#include "actors/wiring_graph.hpp"
#include "engine/exec/cpu_expert_shards.hpp"
#include "engine/exec/cpu_model.hpp"
#include "engine/model/model_weights.hpp"
#include "engine/planning/placement.hpp"
#include "engine/topology/topology.hpp"
#include "kernels/sim/precision.hpp"

namespace muflow::actors {

/// What a wiring asks of the placement and the planners.
struct WiringTraits {
  /// Attention DP ranks and experts on disjoint devices (`[placement] attention_devices`);
  /// else every device is a DP rank and hosts experts.
  bool disaggregated_attention = false;
  /// Accepts a different expert → device map per block (`experts = "affinity"`).
  bool per_block_placement = false;
  /// Accepts Aurora's capability placement (`experts = "capability"`, Theorem 5.1).
  bool capability_placement = false;
  /// Runs replicas of hot experts (`[placement] replicas` / `replica_experts`).
  bool expert_replicas = false;
  /// The device scheduling policy (engine/serving/scheduling_policy.hpp) a run uses when the
  /// topology names none (`[scheduler] policy` absent): "defrag" for AsyncMoE's wirings (its
  /// §3.4 defragging scheduler is part of the design), "fifo" for the barrier wirings.
  std::string_view default_policy = "fifo";
};

/// What a wiring may read when a Server is prepared. References live as long as the call.
struct WiringSetup {
  /// The three references every wiring reads; the optional fields are set after.
  WiringSetup(const engine::topology::Topology& t, const engine::model::ModelConfig& c,
              const engine::planning::Placement& p)
      : topology(t), config(c), placement(p) {}
  const engine::topology::Topology& topology;
  const engine::model::ModelConfig& config;
  const engine::planning::Placement& placement;  ///< planned (affinity, capability) already
  const SimSetup* sim = nullptr;                 ///< sim backend; null on cpu
  kernels::sim::Precision precision = kernels::sim::Precision::kF32;  ///< sim cost precision
  int64_t weight_bytes = 4;  ///< bytes per weight element (2 for bf16)
  std::shared_ptr<const engine::model::ModelWeights> weights;  ///< cpu backend; null on sim
  std::shared_ptr<const engine::exec::CpuModel> model;         ///< cpu backend; null on sim
  /// Real backends: the sim device kind whose rates stand for their devices in planners'
  /// formulas (Backend::rate_kind); empty on sim (SimSetup has the kinds).
  std::string rate_kind;
};

/// A wiring prepared for one Server: immutable, shared by its runs (any host thread).
class PreparedWiring {
 public:
  virtual ~PreparedWiring() = default;
  /// cpu backend: expert weight shards the executors need (Executor::expert_shard), or null.
  virtual std::shared_ptr<const engine::exec::CpuExpertShards> cpu_shards() const {
    return nullptr;
  }
  /// The graph and per-run state of one run. `ctx` holds the model, executors, topology,
  /// placement and num_ranks (no actors yet). Errors: per-run setup that failed.
  virtual absl::StatusOr<std::shared_ptr<const WiringRun>> start_run(
      const RunContext& ctx) const = 0;
};

/// A wiring (stateless; one static instance each, see registry.hpp).
class Wiring {
 public:
  virtual ~Wiring() = default;
  /// The topology's name for it (`wiring = "..."`).
  virtual std::string_view name() const = 0;
  /// What the wiring asks of the placement and the planners.
  virtual WiringTraits traits() const = 0;
  /// Resolves the wiring's private parameters for a Server. Errors: InvalidArgument naming the
  /// topology key that does not fit (e.g. `harmoeny.slots`), or a loader's error.
  virtual absl::StatusOr<std::shared_ptr<const PreparedWiring>> prepare(
      const WiringSetup& setup) const = 0;
};

}  // namespace muflow::actors
