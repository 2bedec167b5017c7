#pragma once
/// \file
/// Building blocks the wirings share: the synchronous-EP graph they start from, expert slot
/// layouts, and a prepared wiring whose runs are a function of the run context.

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "actors/wirings/wiring.hpp"

namespace muflow::actors {

/// DeepSpeed-MoE-style synchronous EP: iteration pacing, a barrier all-to-all per block for
/// dispatch and for combine (concatenation in source order), iteration μ-queues and merge
/// points, each rank's residual to its own merge point. `slot_device` is left empty.
WiringGraph barrier_graph(const RunContext& ctx);

/// One expert stage per expert: slot e of block b on placement.device_of(b, e).
std::vector<std::vector<int64_t>> per_expert_slots(const RunContext& ctx);

/// One expert stage per device: slot d of every block on device d.
std::vector<std::vector<int64_t>> per_device_slots(const RunContext& ctx);

/// A WiringRun that is its graph and nothing else (default KV caches and expert kernels).
class GraphRun final : public WiringRun {
 public:
  explicit GraphRun(WiringGraph graph) { graph_ = std::move(graph); }
};

/// A PreparedWiring without private state: each run is `start(ctx)`.
class StatelessWiring final : public PreparedWiring {
 public:
  using Start = std::function<absl::StatusOr<std::shared_ptr<const WiringRun>>(const RunContext&)>;
  explicit StatelessWiring(Start start) : start_(std::move(start)) {}
  absl::StatusOr<std::shared_ptr<const WiringRun>> start_run(const RunContext& ctx) const override {
    return start_(ctx);
  }

 private:
  Start start_;
};

/// A prepared wiring without private state whose every run is the graph `build(ctx)`.
std::shared_ptr<const PreparedWiring> graph_wiring(
    std::function<WiringGraph(const RunContext&)> build);

}  // namespace muflow::actors
