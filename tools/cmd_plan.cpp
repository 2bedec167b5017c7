// `muflow plan TOPOLOGY`: what the placement and communication planners make of a topology
// (actors/plan_report.hpp), without serving a request.
#include <cstdio>
#include <memory>
#include <string>

#include "actors/plan_report.hpp"
#include "tools/commands.hpp"

namespace muflow::tools {

Command add_plan_command(CLI::App& app) {
  struct Options {
    std::string topology;
    actors::PlanOptions plan;
  };
  auto o = std::make_shared<Options>();
  app.add_option("TOPOLOGY", o->topology, "topology TOML file")->required();
  app.add_option("--traffic", o->plan.traffic_file,
                 "per-rank routing counts CSV (HarMoEny format, e.g. "
                 "../shared/data/routing/switch-base-per-rank-bookcorpus.csv); default: sample "
                 "the topology's router");
  app.add_option("--iteration", o->plan.traffic_iteration, "iteration of --traffic to plan for")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--sample-tokens", o->plan.sample_tokens,
                 "router sample: tokens per DP rank (default 1024)")
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("--routing", o->plan.routing_file,
                 "recorded per-token paths (`muflow run --record-routing`) for the ExFlow "
                 "affinity planner");
  app.add_option("--evaluate", o->plan.evaluate_file,
                 "held-out recorded paths on which the affinity placements are also scored");
  app.add_option("--method", o->plan.affinity_method, "affinity planner: milp, heuristic or both")
      ->check(CLI::IsMember({"milp", "heuristic", "both"}));
  app.add_option("--time-limit", o->plan.affinity_time_limit_s,
                 "MILP time limit in seconds (default 10)")
      ->check(CLI::PositiveNumber);
  app.add_option("--colocate", o->plan.colocate_topology,
                 "a second topology whose model shares the devices (Aurora §6 colocation)");
  return [o]() {
    absl::StatusOr<engine::topology::Topology> topology =
        engine::topology::parse_topology_file(o->topology);
    absl::StatusOr<std::string> report =
        topology.ok() ? actors::plan_report(*topology, o->plan) : topology.status();
    if (!report.ok()) {
      std::fprintf(stderr, "muflow plan: %s\n", std::string(report.status().message()).c_str());
      return 1;
    }
    std::fwrite(report->data(), 1, report->size(), stdout);
    return 0;
  };
}

}  // namespace muflow::tools
