#include "actors/placement_setup.hpp"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "actors/wirings/registry.hpp"
#include "engine/planning/affinity_placement.hpp"
#include "engine/planning/aurora_placement.hpp"
#include "engine/routing/routing_record.hpp"

namespace muflow::actors {

absl::Status apply_affinity_placement(const engine::topology::Topology& topology,
                                      const engine::model::ModelConfig& config,
                                      engine::planning::Placement* placement) {
  auto fail = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: key 'placement.experts' = \"affinity\": %s", topology.source, what));
  };
  absl::StatusOr<const Wiring*> wiring = find_wiring(topology.wiring);
  if (!wiring.ok()) return wiring.status();
  if (!(*wiring)->traits().per_block_placement) {
    return fail(absl::StrFormat(
        "needs wiring %s, got \"%s\"",
        wirings_with([](const WiringTraits& t) { return t.per_block_placement; }),
        topology.wiring));
  }
  absl::StatusOr<engine::routing::RoutingTable> table =
      engine::routing::read_routing_csv(topology.affinity_paths);
  if (!table.ok()) return table.status();
  absl::StatusOr<engine::planning::AffinityCounts> counts =
      engine::planning::affinity_counts_from_routing(*table, config.num_layers, config.num_experts);
  if (!counts.ok()) {
    return fail(absl::StrFormat("%s: %s", topology.affinity_paths, counts.status().message()));
  }
  absl::StatusOr<std::pair<int64_t, int64_t>> grid = node_grid(topology);
  if (!grid.ok()) return fail(std::string(grid.status().message()));
  const auto [num_nodes, g] = *grid;
  engine::planning::AffinityOptions options;
  options.method = topology.affinity_planner == "milp"
                       ? engine::planning::AffinityMethod::kMilp
                       : engine::planning::AffinityMethod::kHeuristic;
  options.time_limit_s = topology.affinity_time_limit_s;
  absl::StatusOr<engine::planning::AffinityPlan> plan =
      engine::planning::plan_affinity_placement(*counts, num_nodes, g, options);
  if (!plan.ok()) return fail(std::string(plan.status().message()));
  const engine::planning::AffinitySolution& best = plan->milp ? *plan->milp : *plan->heuristic;
  placement->block_expert_device = best.placement.expert_device;
  placement->expert_device = best.placement.expert_device.front();
  return absl::OkStatus();
}

absl::StatusOr<std::pair<int64_t, int64_t>> node_grid(const engine::topology::Topology& topology) {
  std::vector<std::string> nodes;
  std::map<std::string, int64_t> per_node;
  for (const engine::topology::DeviceSpec& d : topology.devices) {
    if (per_node[d.node]++ == 0) nodes.push_back(d.node);
  }
  if (nodes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(topology.source, ": no devices"));
  }
  const int64_t g = per_node[nodes.front()];
  for (size_t i = 0; i < topology.devices.size(); ++i) {
    if (per_node[nodes[i / g]] != g || topology.devices[i].node != nodes[i / g]) {
      return absl::InvalidArgumentError(absl::StrCat(
          topology.source, ": the planner needs the same number of devices on every node, "
                           "listed node by node"));
    }
  }
  return std::make_pair(static_cast<int64_t>(nodes.size()), g);
}

std::vector<std::vector<std::vector<int64_t>>> sample_rank_expert_tokens(
    const engine::routing::RouterModel& router, const engine::planning::Placement& placement,
    int64_t tokens_per_rank) {
  const int64_t k = router.num_topk();
  const auto ranks = static_cast<int64_t>(placement.rank_device.size());
  std::vector<std::vector<std::vector<int64_t>>> out;
  std::vector<int32_t> ids(k);
  std::vector<float> w(k);
  for (int32_t b = 0; b < static_cast<int32_t>(router.num_layers()); ++b) {
    std::vector<std::vector<int64_t>> t(ranks, std::vector<int64_t>(router.num_experts(), 0));
    for (int64_t r = 0; r < ranks; ++r) {
      for (int64_t i = 0; i < tokens_per_rank; ++i) {
        router.route(b, r * tokens_per_rank + i, 0, ids.data(), w.data());
        for (int64_t j = 0; j < k; ++j) ++t[r][ids[j]];
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<double> sample_expert_loads(const engine::routing::RouterModel& router,
                                        const engine::planning::Placement& placement,
                                        int64_t tokens_per_rank) {
  std::vector<double> loads(router.num_experts(), 0.0);
  for (const auto& block : sample_rank_expert_tokens(router, placement, tokens_per_rank)) {
    for (const auto& rank : block) {
      for (size_t e = 0; e < rank.size(); ++e) loads[e] += static_cast<double>(rank[e]);
    }
  }
  return loads;
}

absl::Status apply_capability_placement(const engine::topology::Topology& topology,
                                        const engine::model::ModelConfig& config,
                                        const SimSetup* sim, kernels::sim::Precision precision,
                                        engine::planning::Placement* placement) {
  auto fail = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: key 'placement.experts' = \"capability\": %s", topology.source, what));
  };
  if (sim == nullptr) return fail("needs backend = \"sim\" (router loads, device FLOP/s)");
  absl::StatusOr<const Wiring*> wiring = find_wiring(topology.wiring);
  if (!wiring.ok()) return wiring.status();
  if (!(*wiring)->traits().capability_placement) {
    return fail(absl::StrFormat(
        "needs wiring %s, got \"%s\"",
        wirings_with([](const WiringTraits& t) { return t.capability_placement; }),
        topology.wiring));
  }
  const int64_t devices = placement->num_devices;
  if (config.num_experts % devices != 0) {
    return fail(absl::StrFormat("%d experts do not divide over %d devices", config.num_experts,
                                devices));
  }
  std::vector<double> speeds;
  for (const kernels::sim::DeviceKind& kind : sim->kinds) speeds.push_back(kind.peak_flops(precision));
  absl::StatusOr<engine::planning::CapabilityAssignment> a = engine::planning::assign_by_capability(
      sample_expert_loads(*sim->router, *placement, 1024), speeds, config.num_experts / devices);
  if (!a.ok()) return fail(std::string(a.status().message()));
  placement->expert_device = a->gpu_of_expert;
  placement->block_expert_device.clear();
  return absl::OkStatus();
}

}  // namespace muflow::actors
