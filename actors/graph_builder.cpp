#include "actors/graph_builder.hpp"

#include <algorithm>
#include <set>

#include "absl/strings/str_format.h"
#include "actors/collective.hpp"
#include "actors/device.hpp"
#include "actors/model_stages.hpp"
#include "actors/stage.hpp"
#include "kernels/assert.hpp"

namespace muflow::actors {

caf::actor place_collective(caf::actor_system& sys, const std::shared_ptr<RunContext>& ctx,
                            ProcessLayout& layout, CollectiveKind kind, int32_t block) {
  const ActorAddress address{
      kind == CollectiveKind::kDispatch ? ActorRole::kDispatch : ActorRole::kCombine, block, 0};
  const std::vector<int64_t> sources = collective_source_devices(*ctx, kind, block);
  const std::vector<int64_t> dests = collective_dest_devices(*ctx, kind, block);
  std::set<uint32_t> dest_processes;
  for (int64_t d : dests) dest_processes.insert(layout.process_of(d));
  // DP rank 0's process reports both barriers of every block: a layer's start (dispatch) and
  // end (combine) are then taken on one clock and reach the coordinator in order, and before
  // that process's sampled rows of the iteration (Outbox sends reports first).
  MUFLOW_ASSERT(!ctx->placement.rank_device.empty(), "a run without DP ranks");
  const uint32_t primary = layout.process_of(ctx->placement.rank_device.front());
  dest_processes.insert(primary);  // it gathers, even where it hosts no destination
  const uint32_t self = layout.self();
  const bool gathers = dest_processes.count(self) > 0;
  const bool has_source = std::any_of(sources.begin(), sources.end(),
                                      [&](int64_t d) { return layout.hosts_device(d); });
  if (!gathers && !has_source) return layout.remote_in(address, primary);
  CollectiveReplica replica;
  for (uint32_t p : dest_processes) {
    if (p != self) replica.peers.push_back(layout.remote_in(address, p));
  }
  replica.local_device.resize(static_cast<size_t>(ctx->placement.num_devices));
  for (size_t d = 0; d < replica.local_device.size(); ++d) {
    replica.local_device[d] = layout.hosts_device(static_cast<int64_t>(d)) ? 1 : 0;
  }
  replica.gathers = gathers;
  replica.primary = self == primary;
  return spawn_collective(sys, ctx, kind, block, std::move(replica));
}

void build_stages(caf::actor_system& sys, const std::shared_ptr<RunContext>& ctx,
                  std::vector<std::vector<DeviceStage>>& local, ProcessLayout* layout) {
  const engine::model::ModelConfig& c = ctx->config;
  const auto num_devices = static_cast<int32_t>(ctx->placement.num_devices);
  const auto num_ranks = static_cast<int32_t>(ctx->placement.rank_device.size());
  const auto L = static_cast<int32_t>(c.num_layers);
  const WiringGraph& graph = ctx->graph();
  const auto S = static_cast<int32_t>(graph.num_slots());
  ActorTable& t = ctx->actors;

  // Stages per device, in local-index order (after other runs' stages on a shared device);
  // the device actor learns them from this list.
  if (local.size() < static_cast<size_t>(num_devices)) local.resize(num_devices);
  auto add_local = [&](int32_t device, engine::dataflow::LayerId l) {
    local[device].push_back({ctx, l});
    return static_cast<int32_t>(local[device].size() - 1);
  };
  auto trace_thread = [&](int32_t device, int32_t local_index, const std::string& name) {
    if (ctx->trace) ctx->trace->set_thread_name(device, local_index, name);
  };
  // Spawns the stage `make()` builds on device `d`, or, for a device of another process, a
  // handle that carries messages to it there (`layout->remote`). Either way the stage takes
  // the next local index of `d`, so every process numbers a device's stages alike (the
  // entries of a device hosted elsewhere are never read: its device actor is not spawned here).
  auto place = [&](int32_t d, const ActorAddress& address, auto make, caf::actor& actor,
                   StageSite& site) {
    if (layout != nullptr && !layout->hosts_device(d)) {
      const auto li = static_cast<int32_t>(local[d].size());
      local[d].push_back({ctx, engine::dataflow::LayerId{}});
      actor = layout->remote(address, d);
      site = {d, li};
      return;
    }
    std::shared_ptr<StageImpl> impl = make();
    const int32_t li = add_local(d, impl->layer());
    trace_thread(d, li, impl->name());
    actor = spawn_stage(sys, ctx, impl, d, li, li);
    site = {d, li};
  };

  SiteTable& sites = ctx->sites;
  sites.attention.assign(L, std::vector<StageSite>(num_ranks));
  sites.experts.assign(L, std::vector<StageSite>(S));
  sites.samplers.resize(num_ranks);
  t.attention.assign(L, std::vector<caf::actor>(num_ranks));
  t.experts.assign(L, std::vector<caf::actor>(S));
  t.samplers.resize(num_ranks);
  const std::vector<int64_t> in_degree = graph.residual_sources();
  const auto residual_sources = [&](int32_t r) {
    return static_cast<size_t>(r) < in_degree.size() ? in_degree[static_cast<size_t>(r)] : 0;
  };
  for (int32_t b = 0; b < L; ++b) {
    for (int32_t r = 0; r < num_ranks; ++r) {
      const auto d = static_cast<int32_t>(ctx->placement.rank_device[r]);
      place(
          d, {ActorRole::kAttention, b, r},
          [&] {
            return make_attention_stage(ctx, ctx->executors[d].get(), b, r, residual_sources(r));
          },
          t.attention[b][r], sites.attention[b][r]);
    }
    for (int32_t e = 0; e < S; ++e) {
      const auto d = static_cast<int32_t>(graph.slot_device[b][e]);
      place(
          d, {ActorRole::kExpert, b, e},
          [&] { return make_expert_stage(ctx, ctx->executors[d].get(), b, e); }, t.experts[b][e],
          sites.experts[b][e]);
    }
  }
  for (int32_t r = 0; r < num_ranks; ++r) {
    const auto d = static_cast<int32_t>(ctx->placement.rank_device[r]);
    place(
        d, {ActorRole::kSampler, 0, r},
        [&] { return make_sampler_stage(ctx, ctx->executors[d].get(), r, residual_sources(r)); },
        t.samplers[r], sites.samplers[r]);
  }
  const bool barriers = graph.dispatch == EdgeKind::kBarrier || graph.combine == EdgeKind::kBarrier;
  // Across processes the collectives are replicated: the ranks of an iteration would have to
  // reach every replica before its contributions, so every rank runs every iteration there.
  ctx->sparse_iterations = layout == nullptr && graph.ranks_independent();
  if (barriers) {
    for (int32_t b = 0; b < L; ++b) {
      if (layout == nullptr) {
        t.dispatch.push_back(spawn_collective(sys, ctx, CollectiveKind::kDispatch, b));
        t.combine.push_back(spawn_collective(sys, ctx, CollectiveKind::kCombine, b));
        continue;
      }
      t.dispatch.push_back(place_collective(sys, ctx, *layout, CollectiveKind::kDispatch, b));
      t.combine.push_back(place_collective(sys, ctx, *layout, CollectiveKind::kCombine, b));
    }
  }
  for (int32_t d = 0; d < num_devices; ++d) {
    if (ctx->trace) {
      if (barriers) ctx->trace->set_thread_name(d, kWaitLaneTid, "collective waits");
      const engine::topology::DeviceSpec& spec = ctx->topology.devices[d];
      ctx->trace->set_process_name(d,
                                   absl::StrFormat("%s (%s, %s)", spec.name, spec.kind, spec.node));
    }
  }
}

void spawn_devices(caf::actor_system& sys, const std::vector<std::shared_ptr<RunContext>>& ctxs,
                   std::vector<std::vector<DeviceStage>> local,
                   std::shared_ptr<const engine::serving::SchedulingPolicy> policy,
                   ProcessLayout* layout) {
  std::vector<caf::actor> devices;
  std::vector<std::shared_ptr<DeviceGate>> gates(local.size());
  // A batch hold keeps even a lone ready stage waiting, so there every start is a grant.
  const RunContext& first = *ctxs.front();
  const bool direct_start =
      !(first.graph().batch_hold && first.topology.scheduler.hold_min_tokens > 0);
  for (size_t d = 0; d < local.size(); ++d) {
    if (layout != nullptr && !layout->hosts_device(static_cast<int64_t>(d))) {
      devices.push_back(layout->remote({ActorRole::kDevice, 0, static_cast<int32_t>(d)},
                                       static_cast<int64_t>(d)));
      continue;
    }
    gates[d] = std::make_shared<DeviceGate>(direct_start);
    devices.push_back(spawn_device(sys, ctxs.front(), static_cast<int64_t>(d), std::move(local[d]),
                                   policy, gates[d]));
  }
  for (const auto& ctx : ctxs) {
    ctx->actors.devices = devices;
    ctx->actors.device_gates = gates;
  }
}

void build_wiring(caf::actor_system& sys, const std::shared_ptr<RunContext>& ctx,
                  std::shared_ptr<const engine::serving::SchedulingPolicy> policy,
                  ProcessLayout* layout) {
  std::vector<std::vector<DeviceStage>> local;
  build_stages(sys, ctx, local, layout);
  spawn_devices(sys, {ctx}, std::move(local), std::move(policy), layout);
}

}  // namespace muflow::actors
