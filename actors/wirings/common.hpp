#pragma once
/// \file
/// Building blocks the wirings share: the synchronous-EP graph they start from, expert slot
/// layouts, and a prepared wiring whose runs are a function of the run context.

#include <functional>
#include <memory>
#include <vector>

#include "actors/wirings/wiring.hpp"
#include "engine/dataflow/expert_dispatch.hpp"

namespace muflow::actors {

/// DeepSpeed-MoE-style synchronous EP: iteration pacing, a barrier all-to-all per block for
/// dispatch and for combine (concatenation in source order), iteration μ-queues and merge
/// points, each rank's residual to its own merge point. `slot_device` is left empty.
WiringGraph barrier_graph(const RunContext& ctx);

/// One expert stage per expert: [num_layers][num_experts] device indices, slot e of block b on
/// placement.device_of(b, e).
std::vector<std::vector<int64_t>> per_expert_slots(const RunContext& ctx);

/// One expert stage per device: [num_layers][num_devices] device indices, slot d of every block
/// on device d.
std::vector<std::vector<int64_t>> per_device_slots(const RunContext& ctx);

/// The dispatch parts of one barrier as engine::dataflow::DispatchParts ([sources][num_experts],
/// null where a rank sent an expert nothing), expanded from the sparse contributions for the
/// rules that plan over every (rank, expert) count (HarMoEny's rebalance, MoEShard's all-gather).
engine::dataflow::DispatchParts dispatch_parts(const std::vector<ContributionPtr>& slot,
                                               int64_t num_experts);

/// A prepared wiring without private state whose every run is the graph `build(ctx)`
/// (immutable; `build` is called once per run, from the thread that creates the run).
std::shared_ptr<const PreparedWiring> graph_wiring(
    std::function<WiringGraph(const RunContext&)> build);

}  // namespace muflow::actors
