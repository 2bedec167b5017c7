#include "actors/wirings/async_replicated.hpp"

#include <algorithm>
#include <numeric>
#include <set>

#include "absl/strings/str_format.h"
#include "actors/placement_setup.hpp"
#include "actors/wirings/async.hpp"
#include "actors/wirings/common.hpp"

namespace muflow::actors {
namespace {

// A replica stage: expert `expert` of `block`, named apart from its home stage.
class ReplicaKernel final : public ExpertKernel {
 public:
  ReplicaKernel(engine::exec::Executor* exec, int32_t block, int32_t expert)
      : inner_(single_expert_kernel(exec, block, expert)), block_(block), expert_(expert) {}
  double compute(const engine::dataflow::TokenBatch& in, float* y,
                 std::vector<Send>& out) override {
    return inner_->compute(in, y, out);
  }
  std::string name() const override {
    return absl::StrFormat("expert b%d e%d replica", block_, expert_);
  }

 private:
  std::unique_ptr<ExpertKernel> inner_;
  int32_t block_, expert_;
};

class ReplicatedRun final : public WiringRun {
 public:
  ReplicatedRun(WiringGraph graph, std::vector<std::vector<int32_t>> expert_of_slot)
      : expert_of_slot_(std::move(expert_of_slot)) {
    graph_ = std::move(graph);
  }
  std::unique_ptr<ExpertKernel> expert_kernel(const RunContextPtr& ctx,
                                              engine::exec::Executor* exec, int32_t block,
                                              int32_t slot) const override {
    const int32_t expert = expert_of_slot_[block][slot];
    if (expert == slot) return single_expert_kernel(exec, block, expert);
    return std::make_unique<ReplicaKernel>(exec, block, expert);
  }

 private:
  std::vector<std::vector<int32_t>> expert_of_slot_;  // [block][slot]
};

class PreparedReplicas final : public PreparedWiring {
 public:
  explicit PreparedReplicas(std::vector<BlockReplicas> replicas) : replicas_(std::move(replicas)) {}
  absl::StatusOr<std::shared_ptr<const WiringRun>> start_run(const RunContext& ctx) const override {
    WiringGraph g = async_graph(ctx);
    const auto E = static_cast<int32_t>(ctx.config.num_experts);
    std::vector<std::vector<int32_t>> expert_of_slot(ctx.config.num_layers);
    g.replica_slots.assign(ctx.config.num_layers, std::vector<std::vector<int32_t>>(E));
    for (int64_t b = 0; b < ctx.config.num_layers; ++b) {
      expert_of_slot[b].resize(E);
      std::iota(expert_of_slot[b].begin(), expert_of_slot[b].end(), 0);
      for (const auto& [expert, device] : replicas_[b]) {
        const auto slot = static_cast<int32_t>(g.slot_device[b].size());
        g.slot_device[b].push_back(device);
        g.replica_slots[b][expert].push_back(slot);
        expert_of_slot[b].push_back(expert);
      }
    }
    return std::make_shared<const ReplicatedRun>(std::move(g), std::move(expert_of_slot));
  }

 private:
  std::vector<BlockReplicas> replicas_;  // [block]
};

class AsyncReplicatedWiring final : public Wiring {
 public:
  std::string_view name() const override { return "async-replicated"; }
  WiringTraits traits() const override {
    return {.disaggregated_attention = true,
            .per_block_placement = false,
            .capability_placement = false,
            .expert_replicas = true,
            .default_policy = "defrag"};
  }
  absl::StatusOr<std::shared_ptr<const PreparedWiring>> prepare(
      const WiringSetup& s) const override {
    const engine::topology::Topology& t = s.topology;
    const int64_t L = s.config.num_layers, E = s.config.num_experts;
    std::vector<std::vector<double>> loads(L, std::vector<double>(E, 1.0));
    if (t.replica_experts.empty()) {
      if (s.sim == nullptr) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: key 'placement.replicas': the hottest experts come from the sim router's "
            "sample; on backend '%s' list them with replica_experts = [...]",
            t.source, t.backend));
      }
      const auto sample = sample_rank_expert_tokens(*s.sim->router, s.placement, 1024);
      for (int64_t b = 0; b < L; ++b) {
        for (int64_t e = 0; e < E; ++e) {
          loads[b][e] = 0.0;
          for (const auto& rank : sample[b]) loads[b][e] += static_cast<double>(rank[e]);
        }
      }
    }
    absl::StatusOr<std::vector<BlockReplicas>> plan =
        plan_expert_replicas(t, s.placement, loads, t.expert_replicas, t.replica_experts);
    if (!plan.ok()) return plan.status();
    return std::make_shared<const PreparedReplicas>(std::move(*plan));
  }
};

}  // namespace

absl::StatusOr<std::vector<BlockReplicas>> plan_expert_replicas(
    const engine::topology::Topology& topology, const engine::planning::Placement& placement,
    const std::vector<std::vector<double>>& loads, int64_t count,
    const std::vector<int64_t>& experts) {
  const char* key = experts.empty() ? "placement.replicas" : "placement.replica_experts";
  auto fail = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: key '%s': %s", topology.source, key, what));
  };
  std::set<int64_t> ranks(placement.rank_device.begin(), placement.rank_device.end());
  std::vector<int64_t> expert_devices;
  for (int64_t d = 0; d < placement.num_devices; ++d) {
    if (!ranks.count(d)) expert_devices.push_back(d);
  }
  if (expert_devices.size() < 2) {
    return fail(absl::StrFormat("a replica needs a second expert device; the placement has %d",
                                expert_devices.size()));
  }
  const auto E = static_cast<int64_t>(loads.empty() ? 0 : loads.front().size());
  if (count > E) {
    return fail(absl::StrFormat("expected at most %d (the model's experts), got %d", E, count));
  }
  std::set<int64_t> listed;
  for (int64_t e : experts) {
    if (e < 0 || e >= E) {
      return fail(absl::StrFormat("expert %d is outside the model's experts [0, %d)", e, E));
    }
    if (!listed.insert(e).second) return fail(absl::StrFormat("expert %d is listed twice", e));
  }
  std::vector<BlockReplicas> out;
  for (int64_t b = 0; b < static_cast<int64_t>(loads.size()); ++b) {
    std::vector<int64_t> hot = experts;
    if (hot.empty()) {
      hot.resize(E);
      std::iota(hot.begin(), hot.end(), 0);
      std::stable_sort(hot.begin(), hot.end(),
                       [&](int64_t a, int64_t c) { return loads[b][a] > loads[b][c]; });
      hot.resize(count);
    }
    std::vector<double> device_load(placement.num_devices, 0.0);
    for (int64_t e = 0; e < E; ++e) device_load[placement.device_of(b, e)] += loads[b][e];
    BlockReplicas replicas;
    for (int64_t e : hot) {
      const int64_t home = placement.device_of(b, e);
      int64_t best = -1;
      for (int64_t d : expert_devices) {
        if (d != home && (best < 0 || device_load[d] < device_load[best])) best = d;
      }
      device_load[best] += loads[b][e] / 2;
      device_load[home] -= loads[b][e] / 2;
      replicas.push_back({static_cast<int32_t>(e), best});
    }
    out.push_back(std::move(replicas));
  }
  return out;
}

const Wiring& async_replicated_wiring() {
  static const AsyncReplicatedWiring wiring;
  return wiring;
}

}  // namespace muflow::actors
