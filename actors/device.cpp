#include "actors/device.hpp"

#include <cmath>
#include <functional>
#include <queue>
#include <utility>

#include "actors/messages.hpp"
#include "kernels/assert.hpp"

namespace muflow::actors {
namespace {

struct DeviceState {
  std::vector<engine::serving::StageStatus> stages;
  std::vector<RunContextPtr> stage_ctx;  ///< [stages] the run each stage belongs to
  /// Whether a stage runs, shared with the stages (a stage may start and end a run without
  /// this actor when nothing waits: actors/device_gate.hpp).
  std::shared_ptr<DeviceGate> gate;
  /// Stages with queued tokens (queued_tokens > 0): a grant with none skips the policy's scan
  /// (a device of a 1,024-device run hosts ~120 stages and is told `done` after every run).
  int64_t num_queued = 0;
  int64_t device_index = 0;
  uint64_t next_seq = 0;
  double wake_at_s = -1;  ///< batch hold: a wake-up is scheduled for this time (-1 = none)
  /// FIFO policy without batch hold (sync's default): the queued stages as (ready_seq, local
  /// index), earliest first, so a grant pops one instead of scanning every stage (a device of
  /// a 1,024-device run hosts ~120). The top valid entry is FifoPolicy::pick's answer: the
  /// queued stage that became ready first (ready_seq is unique per device). An entry whose
  /// stage has no tokens, or became ready again since, is stale and dropped when met.
  bool fifo_index = false;
  std::priority_queue<std::pair<uint64_t, int32_t>, std::vector<std::pair<uint64_t, int32_t>>,
                      std::greater<>>
      ready_fifo;
  static inline const char* name = "muflow.device";
};

caf::actor stage_actor(const RunContext& ctx, const engine::dataflow::LayerId& l) {
  switch (l.kind) {
    case engine::dataflow::StageKind::kAttention:
      return ctx.actors.attention[l.block][l.index];
    case engine::dataflow::StageKind::kExpert:
      return ctx.actors.experts[l.block][l.index];
    case engine::dataflow::StageKind::kSampler:
      return ctx.actors.samplers[l.index];
  }
  return {};
}

double now_s(caf::stateful_actor<DeviceState>* self, const RunContext& ctx) {
  return ctx.seconds_since_start(self->home_system().clock().now());
}

void try_grant(caf::stateful_actor<DeviceState>* self, const RunContext& ctx,
               const engine::serving::SchedulingPolicy& policy) {
  auto& st = self->state;
  // A running stage (granted, or started on its own) holds the gate until it ends.
  if (st.num_queued == 0 || !st.gate->hold()) return;
  const auto& sched = ctx.topology.scheduler;
  if (ctx.graph().batch_hold && sched.hold_min_tokens > 0) {
    const double now = now_s(self, ctx);
    const double release = engine::serving::apply_batch_hold(st.stages, now, sched.hold_min_tokens,
                                                             sched.hold_max_ms * 1e-3);
    if (std::isfinite(release) && (st.wake_at_s < now || release < st.wake_at_s)) {
      st.wake_at_s = release;
      self->delayed_send(self, std::chrono::nanoseconds(std::llround((release - now) * 1e9) + 1),
                         wake_atom::value);
    }
  }
  int64_t pick = -1;
  if (st.fifo_index) {
    while (!st.ready_fifo.empty()) {
      const auto [seq, local] = st.ready_fifo.top();
      st.ready_fifo.pop();
      const engine::serving::StageStatus& s = st.stages[static_cast<size_t>(local)];
      if (s.queued_tokens > 0 && s.ready_seq == seq) {
        pick = local;
        break;
      }
    }
  } else {
    pick = policy.pick(st.stages);
  }
  if (pick < 0) {
    st.gate->release(st.num_queued);
    return;
  }
  st.stages[pick].queued_tokens = 0;  // re-reported by the stage with `ready` or `done`
  --st.num_queued;
  st.gate->set_queued(st.num_queued);
  const RunContext& run = *st.stage_ctx[pick];
  caf::actor stage = stage_actor(run, st.stages[pick].layer);
  // Virtual time: a grant takes the device actor's measured hand-off time (host_grant), during
  // which the device stays held (a stage starting on its own skips it).
  const auto d = static_cast<size_t>(st.device_index);
  const double grant_s = run.virtual_time && d < run.executors.size() && run.executors[d]
                             ? run.executors[d]->grant_host_seconds()
                             : 0.0;
  if (grant_s > 0) {
    self->delayed_send(stage, std::chrono::nanoseconds(std::llround(grant_s * 1e9)),
                       grant_atom::value);
    return;
  }
  self->send(stage, grant_atom::value);
}

void update(DeviceState& st, int32_t local, int64_t queued, double now) {
  engine::serving::StageStatus& s = st.stages[local];
  if (s.queued_tokens <= 0 && queued > 0) {
    s.ready_seq = st.next_seq++;
    s.ready_since_s = now;
    if (st.fifo_index) st.ready_fifo.emplace(s.ready_seq, local);
  }
  st.num_queued += static_cast<int64_t>(queued > 0) - static_cast<int64_t>(s.queued_tokens > 0);
  s.queued_tokens = queued;
}

caf::behavior device_behavior(caf::stateful_actor<DeviceState>* self, RunContextPtr ctx,
                              int64_t device_index, std::vector<DeviceStage> stages,
                              std::shared_ptr<const engine::serving::SchedulingPolicy> policy,
                              std::shared_ptr<DeviceGate> gate) {
  self->state.gate = std::move(gate);
  for (const DeviceStage& s : stages) {
    self->state.stages.push_back({s.layer, 0, 0});
    self->state.stage_ctx.push_back(s.ctx);
  }
  self->state.device_index = device_index;
  const auto& sched = ctx->topology.scheduler;
  self->state.fifo_index =
      dynamic_cast<const engine::serving::FifoPolicy*>(policy.get()) != nullptr &&
      !(ctx->graph().batch_hold && sched.hold_min_tokens > 0);
  return {
      [=](ready_atom, int32_t local, int64_t queued) {
        auto& st = self->state;
        update(st, local, queued, now_s(self, *ctx));
        st.gate->on_ready(st.num_queued);
        try_grant(self, *ctx, *policy);
      },
      [=](wake_atom) { try_grant(self, *ctx, *policy); },
      [=](done_atom, int32_t local, int64_t queued) {
        auto& st = self->state;
        update(st, local, queued, now_s(self, *ctx));
        st.gate->release(st.num_queued);
        try_grant(self, *ctx, *policy);
      },
  };
}

}  // namespace

caf::actor spawn_device(caf::actor_system& sys, RunContextPtr ctx, int64_t device_index,
                        std::vector<DeviceStage> stages,
                        std::shared_ptr<const engine::serving::SchedulingPolicy> policy,
                        std::shared_ptr<DeviceGate> gate) {
  MUFLOW_ASSERT(gate != nullptr, "spawn_device: no gate");
  return sys.spawn(device_behavior, std::move(ctx), device_index, std::move(stages),
                   std::move(policy), std::move(gate));
}

}  // namespace muflow::actors
