#include "actors/plan_report.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "actors/placement_setup.hpp"
#include "actors/server.hpp"
#include "actors/backends/sim_setup.hpp"
#include "engine/planning/affinity_placement.hpp"
#include "engine/planning/aurora_placement.hpp"
#include "engine/planning/placement.hpp"
#include "engine/routing/router_replay.hpp"
#include "engine/routing/routing_record.hpp"
#include "transport/all_to_all_order.hpp"
#include "transport/aurora_order.hpp"

namespace muflow::actors {
namespace {

constexpr transport::A2aOrder kOrders[] = {
    transport::A2aOrder::kRowMajor, transport::A2aOrder::kRandom, transport::A2aOrder::kSjf,
    transport::A2aOrder::kAuroraUnsplit, transport::A2aOrder::kAuroraChunked,
    transport::A2aOrder::kAurora};

// Token counts one MoE block's dispatch sends: tokens[rank][expert].
using RankExpertTokens = std::vector<std::vector<int64_t>>;

// What the planners need to know about one topology.
struct Planned {
  engine::topology::Topology topology;
  engine::model::ModelConfig config;
  engine::planning::Placement placement;
  std::unique_ptr<SimSetup> sim;  // null on the cpu backend
};

absl::StatusOr<Planned> load(const engine::topology::Topology& topology) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::create(topology);
  if (!server.ok()) return server.status();
  Planned p;
  p.topology = (*server)->topology();
  p.config = (*server)->config();
  p.placement = (*server)->placement();
  if (p.topology.backend == "sim") {
    absl::StatusOr<SimSetup> sim = make_sim_setup(p.topology, p.config);
    if (!sim.ok()) return sim.status();
    p.sim = std::make_unique<SimSetup>(std::move(*sim));
  }
  return p;
}

// Per block: tokens each DP rank routes to each expert, from a per-rank CSV iteration.
absl::StatusOr<std::vector<RankExpertTokens>> traffic_from_csv(const Planned& p,
                                                               const PlanOptions& o) {
  absl::StatusOr<engine::routing::PerRankRoutingCounts> counts =
      engine::routing::load_per_rank_routing_csv(o.traffic_file, p.config.num_experts);
  if (!counts.ok()) return counts.status();
  const auto ranks = static_cast<int64_t>(p.placement.rank_device.size());
  if (counts->num_ranks != ranks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: world size %d, but topology %s has %d DP ranks", o.traffic_file, counts->num_ranks,
        p.topology.source, ranks));
  }
  if (o.traffic_iteration < 0 || o.traffic_iteration >= counts->num_iterations) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: iteration %d out of range [0, %d)", o.traffic_file,
                        o.traffic_iteration, counts->num_iterations));
  }
  // Block b plans for the CSV's layer b; blocks beyond the CSV's layers are not planned.
  std::vector<RankExpertTokens> out;
  // Bytes must fit int64 in the planners: at most 2^40 tokens per (rank, expert) entry.
  constexpr int64_t kMaxTokens = int64_t{1} << 40;
  for (int64_t layer = 0; layer < std::min(counts->num_layers, p.config.num_layers); ++layer) {
    RankExpertTokens t(ranks, std::vector<int64_t>(p.config.num_experts, 0));
    int64_t sum = 0;
    for (int64_t r = 0; r < ranks; ++r) {
      for (int64_t e = 0; e < p.config.num_experts; ++e) {
        t[r][e] = counts->count(r, layer, o.traffic_iteration, e);
        if (t[r][e] > kMaxTokens / std::max<int64_t>(1, ranks * p.config.num_experts)) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "%s: layer %d rank %d expert %d: %d tokens is more than this planner handles",
              o.traffic_file, layer, r, e, t[r][e]));
        }
        sum += t[r][e];
      }
    }
    if (sum == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: layer %d of iteration %d routes no tokens", o.traffic_file, layer,
          o.traffic_iteration));
    }
    out.push_back(std::move(t));
  }
  return out;
}

// Per block: tokens each DP rank routes to each expert in a sample of the topology's router.
std::vector<RankExpertTokens> traffic_from_router(const Planned& p, int64_t sample_tokens) {
  return sample_rank_expert_tokens(*p.sim->router, p.placement, sample_tokens);
}

// Device-to-device bytes of one dispatch.
transport::TrafficMatrix device_bytes(const Planned& p, const RankExpertTokens& t) {
  const auto d = static_cast<size_t>(p.placement.num_devices);
  transport::TrafficMatrix bytes(d, std::vector<int64_t>(d, 0));
  const int64_t row_bytes = p.config.hidden_size * p.topology.network.activation_bytes;
  for (size_t r = 0; r < t.size(); ++r) {
    for (size_t e = 0; e < t[r].size(); ++e) {
      bytes[p.placement.rank_device[r]][p.placement.expert_device[e]] += t[r][e] * row_bytes;
    }
  }
  return bytes;
}

std::vector<double> expert_loads(const std::vector<RankExpertTokens>& traffic, int64_t experts) {
  std::vector<double> loads(experts, 0.0);
  for (const RankExpertTokens& t : traffic) {
    for (const auto& row : t) {
      for (int64_t e = 0; e < experts; ++e) loads[e] += static_cast<double>(row[e]);
    }
  }
  return loads;
}

absl::StatusOr<std::vector<RankExpertTokens>> traffic_of(const Planned& p, const PlanOptions& o,
                                                         std::string* source) {
  if (!o.traffic_file.empty()) {
    *source = absl::StrFormat("%s, iteration %d", o.traffic_file, o.traffic_iteration);
    return traffic_from_csv(p, o);
  }
  *source = absl::StrFormat("router %s, %d tokens per DP rank", p.sim->router->describe(),
                            o.sample_tokens);
  return traffic_from_router(p, o.sample_tokens);
}

void all_to_all_section(const Planned& p, const std::vector<RankExpertTokens>& traffic,
                        const std::string& source, std::string* out) {
  absl::StrAppend(out, "== all-to-all transmission order (Aurora §4-5; dispatch, ms) ==\n",
                  "traffic: ", source, "\n");
  absl::StatusOr<std::shared_ptr<transport::BigSwitchNetwork>> net = make_sim_network(*p.sim);
  if (!net.ok()) {
    absl::StrAppend(out, "network: ", net.status().message(), "\n\n");
    return;
  }
  std::string header = absl::StrFormat("%-6s %10s", "block", "b_max");
  for (transport::A2aOrder order : kOrders) {
    absl::StrAppend(&header, absl::StrFormat(" %14s", transport::a2a_order_name(order)));
  }
  absl::StrAppend(out, header, "  chunks\n");
  std::vector<double> total(std::size(kOrders), 0.0);
  double total_bound = 0.0;
  for (size_t b = 0; b < traffic.size(); ++b) {
    const transport::TrafficMatrix bytes = device_bytes(p, traffic[b]);
    const double bound = transport::port_load_lower_bound(**net, bytes);
    total_bound += bound;
    std::string line = absl::StrFormat("%-6d %10.4f", b, bound * 1e3);
    size_t chunks = 0;
    for (size_t i = 0; i < std::size(kOrders); ++i) {
      const std::vector<transport::Transfer> order =
          transport::order_all_to_all(kOrders[i], **net, bytes, 0.0, 0x5eed + b);
      const double t = transport::makespan((*net)->finish_times(order, 0.0), 0.0);
      total[i] += t;
      absl::StrAppend(&line, absl::StrFormat(" %14.4f", t * 1e3));
      if (kOrders[i] == transport::A2aOrder::kAuroraChunked) chunks = order.size();
    }
    absl::StrAppend(out, line, absl::StrFormat("  %zu\n", chunks));
  }
  std::string line = absl::StrFormat("%-6s %10.4f", "sum", total_bound * 1e3);
  for (double t : total) absl::StrAppend(&line, absl::StrFormat(" %14.4f", t * 1e3));
  absl::StrAppend(out, line, "\n");
  for (size_t i = 0; i < std::size(kOrders); ++i) {
    absl::StrAppend(out, absl::StrFormat("%s: %.3fx b_max%s", transport::a2a_order_name(kOrders[i]),
                                         total_bound > 0 ? total[i] / total_bound : 1.0,
                                         i + 1 < std::size(kOrders) ? ", " : "\n"));
  }
  absl::StrAppend(out, "\n");
}

void capability_section(const Planned& p, const std::vector<RankExpertTokens>& traffic,
                        std::string* out) {
  const kernels::sim::Precision precision = p.topology.model.dtype == "bf16"
                                                ? kernels::sim::Precision::kBF16
                                                : kernels::sim::Precision::kF32;
  std::vector<double> speeds;
  std::map<std::string, int> kinds;
  for (const auto& k : p.sim->kinds) {
    speeds.push_back(k.peak_flops(precision));
    ++kinds[k.name];
  }
  if (kinds.size() < 2) return;
  absl::StrAppend(out, "== mixed GPU kinds: experts by load on GPUs by FLOP/s (Aurora Thm 5.1) ==\n");
  const int64_t d = p.placement.num_devices, e = p.config.num_experts;
  if (e % d != 0) {
    absl::StrAppend(out, absl::StrFormat("skipped: %d experts do not divide over %d devices\n\n", e, d));
    return;
  }
  const std::vector<double> loads = expert_loads(traffic, e);
  absl::StatusOr<engine::planning::CapabilityAssignment> a =
      engine::planning::assign_by_capability(loads, speeds, e / d);
  if (!a.ok()) {
    absl::StrAppend(out, "error: ", a.status().message(), "\n\n");
    return;
  }
  std::vector<double> current(d, 0.0);
  for (int64_t x = 0; x < e; ++x) current[p.placement.expert_device[x]] += loads[x];
  double current_max = 0.0;
  for (int64_t g = 0; g < d; ++g) current_max = std::max(current_max, current[g] / speeds[g]);
  std::vector<std::string> devices;
  for (int64_t x = 0; x < e; ++x) devices.push_back(absl::StrCat(a->gpu_of_expert[x]));
  absl::StrAppend(out, "expert_device = [", absl::StrJoin(devices, ", "), "]\n",
                  absl::StrFormat("max tokens / (TFLOP/s): placement %.3f, by capability %.3f\n\n",
                                  current_max * 1e12, a->max_time * 1e12));
}

absl::StatusOr<engine::planning::AffinityCounts> read_counts(const Planned& p,
                                                             const std::string& file) {
  absl::StatusOr<engine::routing::RoutingTable> table = engine::routing::read_routing_csv(file);
  if (!table.ok()) return table.status();
  absl::StatusOr<engine::planning::AffinityCounts> counts =
      engine::planning::affinity_counts_from_routing(*table, p.config.num_layers,
                                                     p.config.num_experts);
  if (!counts.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", counts.status().message()));
  }
  return counts;
}

absl::Status affinity_section(const Planned& p, const PlanOptions& o, std::string* out) {
  absl::StatusOr<engine::planning::AffinityCounts> counts = read_counts(p, o.routing_file);
  if (!counts.ok()) return counts.status();
  std::optional<engine::planning::AffinityCounts> held_out;
  if (!o.evaluate_file.empty()) {
    absl::StatusOr<engine::planning::AffinityCounts> c = read_counts(p, o.evaluate_file);
    if (!c.ok()) return c.status();
    held_out = std::move(*c);
  }
  absl::StatusOr<std::pair<int64_t, int64_t>> grid = node_grid(p.topology);
  if (!grid.ok()) return grid.status();
  const auto [num_nodes, g] = *grid;
  engine::planning::AffinityOptions opt;
  opt.method = o.affinity_method == "milp"        ? engine::planning::AffinityMethod::kMilp
               : o.affinity_method == "heuristic" ? engine::planning::AffinityMethod::kHeuristic
                                                  : engine::planning::AffinityMethod::kBoth;
  opt.time_limit_s = o.affinity_time_limit_s;
  absl::StatusOr<engine::planning::AffinityPlan> plan =
      engine::planning::plan_affinity_placement(*counts, num_nodes, g, opt);
  if (!plan.ok()) return plan.status();
  absl::StrAppend(out, "== expert affinity placement (ExFlow §IV) ==\n",
                  absl::StrFormat("paths: %s (%d token transitions, %d nodes x %d devices)\n",
                                  o.routing_file, counts->total(), num_nodes, g));
  const double base = plan->round_robin.cross_device.fraction();
  auto row = [&](const char* name, const engine::planning::AffinitySolution& s) {
    absl::StrAppend(out, absl::StrFormat(
        "%-12s cross-device hops %8d (%5.1f %%)  cross-node %8d  %s%s\n", name,
        s.cross_device.hops, 100.0 * s.cross_device.fraction(), s.cross_node.hops,
        base > 0 ? absl::StrFormat("%.1f %% fewer than round robin",
                                   100.0 * (1.0 - s.cross_device.fraction() / base))
                 : std::string("-"),
        &s == &plan->round_robin ? ""
                                 : absl::StrFormat(", %.2f s%s", s.wall_s,
                                                   s.optimal ? ", proven optimal" : "")));
  };
  row("round-robin", plan->round_robin);
  if (plan->heuristic) row("heuristic", *plan->heuristic);
  if (plan->milp) row("milp", *plan->milp);
  if (held_out) {
    absl::StrAppend(out, absl::StrFormat("held-out paths: %s (%d token transitions)\n",
                                         o.evaluate_file, held_out->total()));
    absl::StatusOr<engine::planning::HopCount> rr =
        engine::planning::cross_device_hops(*held_out, plan->round_robin.placement);
    if (!rr.ok()) return rr.status();
    auto scored = [&](const char* name,
                      const engine::planning::AffinitySolution& s) -> absl::Status {
      absl::StatusOr<engine::planning::HopCount> h =
          engine::planning::cross_device_hops(*held_out, s.placement);
      if (!h.ok()) return h.status();
      absl::StrAppend(out, absl::StrFormat(
          "%-12s cross-device hops %8d (%5.1f %%)  %s\n", name, h->hops, 100.0 * h->fraction(),
          rr->fraction() > 0 ? absl::StrFormat("%.1f %% fewer than round robin",
                                               100.0 * (1.0 - h->fraction() / rr->fraction()))
                             : std::string("-")));
      return absl::OkStatus();
    };
    if (absl::Status s = scored("round-robin", plan->round_robin); !s.ok()) return s;
    if (plan->heuristic) {
      if (absl::Status s = scored("heuristic", *plan->heuristic); !s.ok()) return s;
    }
    if (plan->milp) {
      if (absl::Status s = scored("milp", *plan->milp); !s.ok()) return s;
    }
  }
  const engine::planning::AffinitySolution& best = plan->milp ? *plan->milp : *plan->heuristic;
  for (size_t s = 0; s < best.placement.expert_device.size(); ++s) {
    std::vector<std::string> devs;
    for (int64_t d : best.placement.expert_device[s]) devs.push_back(absl::StrCat(d));
    absl::StrAppend(out, absl::StrFormat("block %d expert_device = [%s]\n", s,
                                         absl::StrJoin(devs, ", ")));
  }
  absl::StrAppend(out, "\n");
  return absl::OkStatus();
}

absl::Status colocation_section(const Planned& a, const PlanOptions& o, std::string* out) {
  absl::StatusOr<engine::topology::Topology> other =
      engine::topology::parse_topology_file(o.colocate_topology);
  if (!other.ok()) return other.status();
  absl::StatusOr<Planned> b = load(*other);
  if (!b.ok()) return b.status();
  if (!b->sim) {
    return absl::InvalidArgumentError(
        absl::StrCat(o.colocate_topology, ": colocation planning needs backend = \"sim\""));
  }
  const int64_t n = a.placement.num_devices;
  if (a.config.num_experts != n || b->config.num_experts != n || b->placement.num_devices != n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "colocation (Aurora §6) needs one expert of each model per device: %s has %d experts "
        "on %d devices, %s %d on %d", a.topology.source, a.config.num_experts, n,
        o.colocate_topology, b->config.num_experts, b->placement.num_devices));
  }
  auto traffic = [&](const Planned& p) -> std::vector<engine::planning::ExpertTraffic> {
    // Sum over blocks of the device traffic of each expert's GPU (tokens), as §6.2's a_i.
    std::vector<engine::planning::ExpertTraffic> t(n);
    for (const RankExpertTokens& layer : traffic_from_router(p, o.sample_tokens)) {
      for (size_t r = 0; r < layer.size(); ++r) {
        for (int64_t e = 0; e < n; ++e) {
          const int64_t src = p.placement.rank_device[r], dst = p.placement.expert_device[e];
          if (src == dst) continue;
          t[src].send += static_cast<double>(layer[r][e]);
          t[dst].recv += static_cast<double>(layer[r][e]);
        }
      }
    }
    // Expert e runs on the device expert_device[e]: its traffic is that device's.
    std::vector<engine::planning::ExpertTraffic> by_expert(n);
    for (int64_t e = 0; e < n; ++e) by_expert[e] = t[p.placement.expert_device[e]];
    return by_expert;
  };
  const std::vector<engine::planning::ExpertTraffic> ta = traffic(a), tb = traffic(*b);
  absl::StatusOr<engine::planning::ColocationPlan> plan =
      engine::planning::colocate_bottleneck(ta, tb);
  if (!plan.ok()) return plan.status();
  double naive = 0.0;
  for (int64_t i = 0; i < n; ++i)
    naive = std::max(naive, engine::planning::pair_cost(ta[i], tb[i]));
  absl::StrAppend(out, "== colocating two models (Aurora §6, bottleneck matching) ==\n",
                  absl::StrFormat("with %s; cost = max(sent, received) tokens per device\n",
                                  o.colocate_topology));
  std::vector<std::string> pairs;
  for (const engine::planning::ExpertPair& pr : plan->pairs)
    pairs.push_back(absl::StrFormat("(%d,%d)", pr.a, pr.b));
  // The second model's placement that realises the pairs next to this one's experts.
  std::vector<std::string> b_device(n);
  for (const engine::planning::ExpertPair& pr : plan->pairs) {
    b_device[pr.b] = absl::StrCat(a.placement.expert_device[pr.a]);
  }
  absl::StrAppend(out, "device pairs (a, b) = ", absl::StrJoin(pairs, " "), "\n",
                  absl::StrFormat("bottleneck: expert i with i %.0f, matched %.0f (%.3fx)\n",
                                  naive, plan->max_cost,
                                  plan->max_cost > 0 ? naive / plan->max_cost : 1.0),
                  "serve them with `muflow run A --colocate B`, B's [placement] experts = [",
                  absl::StrJoin(b_device, ", "), "]\n");
  std::vector<double> speeds;
  for (const auto& k : a.sim->kinds) speeds.push_back(k.peak_flops(kernels::sim::Precision::kBF16));
  if (std::adjacent_find(speeds.begin(), speeds.end(), std::not_equal_to<>()) != speeds.end()) {
    absl::StatusOr<engine::planning::HeterogeneousColocationPlan> h =
        engine::planning::colocate_heterogeneous(ta, tb, speeds);
    if (!h.ok()) return h.status();
    pairs.clear();
    for (const engine::planning::ExpertPair& pr : h->pair_of_gpu)
      pairs.push_back(absl::StrFormat("(%d,%d)", pr.a, pr.b));
    absl::StrAppend(out, "mixed GPUs (§7.2 decoupled): device pairs = ", absl::StrJoin(pairs, " "),
                    absl::StrFormat(", max tokens / (TFLOP/s) %.3f\n", h->max_time * 1e12));
  }
  absl::StrAppend(out, "\n");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> plan_report(const engine::topology::Topology& topology,
                                        const PlanOptions& options) {
  if (options.sample_tokens < 1 || options.sample_tokens > 1'000'000) {
    return absl::InvalidArgumentError("--sample-tokens: expected an integer in [1, 1000000]");
  }
  if (options.affinity_method != "milp" && options.affinity_method != "heuristic" &&
      options.affinity_method != "both") {
    return absl::InvalidArgumentError(absl::StrCat("--method '", options.affinity_method,
                                                   "': expected milp, heuristic or both"));
  }
  if (!(options.affinity_time_limit_s > 0)) {
    return absl::InvalidArgumentError("--time-limit: expected seconds > 0");
  }
  absl::StatusOr<Planned> p = load(topology);
  if (!p.ok()) return p.status();
  std::string out = absl::StrFormat(
      "muflow plan: %s: %d devices, %d DP ranks, %d experts x %d blocks, top-%d, placement %s\n\n",
      p->topology.source, p->placement.num_devices, p->placement.rank_device.size(),
      p->config.num_experts, p->config.num_layers, p->config.num_topk, p->topology.placement);
  if (p->sim) {
    std::string source;
    absl::StatusOr<std::vector<RankExpertTokens>> traffic = traffic_of(*p, options, &source);
    if (!traffic.ok()) return traffic.status();
    all_to_all_section(*p, *traffic, source, &out);
    capability_section(*p, *traffic, &out);
  } else {
    absl::StrAppend(&out, "(all-to-all order and GPU kinds: need backend = \"sim\" for the "
                          "network and device models)\n\n");
  }
  if (!options.routing_file.empty()) {
    if (absl::Status s = affinity_section(*p, options, &out); !s.ok()) return s;
  }
  if (!options.colocate_topology.empty()) {
    if (!p->sim) {
      return absl::InvalidArgumentError(absl::StrCat(
          p->topology.source, ": colocation planning needs backend = \"sim\""));
    }
    if (absl::Status s = colocation_section(*p, options, &out); !s.ok()) return s;
  }
  return out;
}

}  // namespace muflow::actors
