#include "actors/affinity_setup.hpp"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/affinity_placement.hpp"
#include "engine/routing_record.hpp"

namespace muflow::actors {

absl::Status apply_affinity_placement(const engine::Topology& topology,
                                      const engine::ModelConfig& config,
                                      engine::Placement* placement) {
  auto fail = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: key 'placement.experts' = \"affinity\": %s", topology.source, what));
  };
  if (topology.wiring != "sync" && topology.wiring != "exflow") {
    return fail(absl::StrFormat("needs wiring \"sync\" or \"exflow\", got \"%s\"",
                                topology.wiring));
  }
  absl::StatusOr<engine::RoutingTable> table = engine::read_routing_csv(topology.affinity_paths);
  if (!table.ok()) return table.status();
  absl::StatusOr<engine::AffinityCounts> counts =
      engine::affinity_counts_from_routing(*table, config.num_layers, config.num_experts);
  if (!counts.ok()) {
    return fail(absl::StrFormat("%s: %s", topology.affinity_paths, counts.status().message()));
  }
  // Nodes in order of first appearance; device = node · per_node + gpu.
  std::vector<std::string> nodes;
  std::map<std::string, int64_t> per_node;
  for (const engine::DeviceSpec& d : topology.devices) {
    if (per_node[d.node]++ == 0) nodes.push_back(d.node);
  }
  const int64_t g = per_node[nodes.front()];
  for (size_t i = 0; i < topology.devices.size(); ++i) {
    if (per_node[nodes[i / g]] != g || topology.devices[i].node != nodes[i / g]) {
      return fail("needs the same number of devices on every node, listed node by node");
    }
  }
  engine::AffinityOptions options;
  options.method = topology.affinity_planner == "milp" ? engine::AffinityMethod::kMilp
                                                       : engine::AffinityMethod::kHeuristic;
  options.time_limit_s = topology.affinity_time_limit_s;
  absl::StatusOr<engine::AffinityPlan> plan = engine::plan_affinity_placement(
      *counts, static_cast<int64_t>(nodes.size()), g, options);
  if (!plan.ok()) return fail(std::string(plan.status().message()));
  const engine::AffinitySolution& best = plan->milp ? *plan->milp : *plan->heuristic;
  placement->block_expert_device = best.placement.expert_device;
  placement->expert_device = best.placement.expert_device.front();
  return absl::OkStatus();
}

}  // namespace muflow::actors
