#include "actors/stage.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "engine/exec/run_spread.hpp"
#include "kernels/assert.hpp"
#include "nlohmann/json.hpp"

namespace muflow::actors {

int64_t count_requests(const std::vector<engine::dataflow::TokenMeta>& tokens) {
  std::vector<int64_t> ids;
  ids.reserve(tokens.size());
  for (const engine::dataflow::TokenMeta& t : tokens) ids.push_back(t.request_id);
  std::sort(ids.begin(), ids.end());
  return std::unique(ids.begin(), ids.end()) - ids.begin();
}

namespace {

/// A run whose outputs wait for the virtual clock to reach its end.
struct PendingRun {
  double begin_s = 0, end_s = 0;
  RunInfo info;
  absl::Status status;
  std::vector<Send> out;
  /// A shared run (engine/exec/device_activity.hpp): it ends when a finish message of its
  /// latest generation arrives (end_s is then the clock's time), not at end_s.
  bool shared = false;
};

struct StageState {
  std::shared_ptr<StageImpl> impl;
  RunContextPtr ctx;
  int64_t device_index = 0;
  int32_t local_index = 0;
  int64_t trace_tid = 0;
  uint64_t runs = 0;          ///< virtual time: spread draws made (the n of the next one)
  bool failed = false;        ///< after a failure the stage reports nothing ready and drops input
  int64_t traced_depth = -1;  ///< last μ-queue depth written to the trace
  std::optional<PendingRun> pending;  ///< virtual time: the run in progress
  static inline const char* name = "muflow.stage";
};

// Sends `sends` from the stage's device: at once, or (sim, point-to-point to another device)
// when the big-switch network has carried the payload.
void flush(caf::stateful_actor<StageState>* self, std::vector<Send>& sends) {
  const RunContext& ctx = *self->state.ctx;
  const int64_t from = self->state.device_index;
  // The timed sends of one flush leave together: one call, so a fair-share network shares
  // the ports between them.
  std::vector<size_t> timed;
  std::vector<std::pair<int32_t, int64_t>> legs;
  for (size_t i = 0; i < sends.size(); ++i) {
    const Send& s = sends[i];
    if (ctx.channel->timed() && s.to_device >= 0 && s.to_device != from && s.bytes > 0) {
      timed.push_back(i);
      legs.emplace_back(static_cast<int32_t>(s.to_device), s.bytes);
    }
  }
  std::vector<double> arrive_s;
  double now_s = 0.0;
  if (!timed.empty()) {
    now_s = ctx.seconds_since_start(self->home_system().clock().now());
    arrive_s = ctx.channel->transfers(static_cast<int32_t>(from), legs, now_s);
  }
  size_t next_timed = 0;
  for (size_t i = 0; i < sends.size(); ++i) {
    Send& s = sends[i];
    if (next_timed < timed.size() && timed[next_timed] == i) {
      const double arrive = arrive_s[next_timed++];
      self->delayed_send(s.dest, std::chrono::nanoseconds(std::llround((arrive - now_s) * 1e9)),
                         std::move(s.msg));
      continue;
    }
    self->send(s.dest, std::move(s.msg));
  }
  sends.clear();
}

double now_us(caf::stateful_actor<StageState>* self) {
  return self->state.ctx->seconds_since_start(self->home_system().clock().now()) * 1e6;
}

// Traces the μ-queue depth (tokens ready to run) when it changed.
void trace_depth(caf::stateful_actor<StageState>* self, double ts_us) {
  auto& st = self->state;
  if (!st.ctx->trace) return;
  const int64_t depth = st.failed ? 0 : st.impl->ready_tokens();
  if (depth == st.traced_depth) return;
  st.traced_depth = depth;
  st.ctx->trace->counter("queue " + st.impl->name(), st.device_index, ts_us,
                         nlohmann::json{{"tokens", depth}});
}

void fail(caf::stateful_actor<StageState>* self, const absl::Status& status);

// The gate of this stage's device (spawn_devices made it before any stage got work).
DeviceGate& gate(caf::stateful_actor<StageState>* self) {
  const auto d = static_cast<size_t>(self->state.device_index);
  const auto& gates = self->state.ctx->actors.device_gates;
  MUFLOW_ASSERT(d < gates.size() && gates[d] != nullptr,
                "stage: its device has no gate (spawn_devices not run for this process)");
  return *gates[d];
}

// The device runs a stage (true) or not: its executor's busy flag (sim: what runs beside a
// kernel, engine/exec/device_activity.hpp; a no-op on real backends) and the trace's busy
// counter of the device, at the clock's time.
void set_device_busy(caf::stateful_actor<StageState>* self, bool busy) {
  const auto& st = self->state;
  const auto d = static_cast<size_t>(st.device_index);
  const double t_us = now_us(self);
  if (d < st.ctx->executors.size() && st.ctx->executors[d]) {
    st.ctx->executors[d]->set_device_busy(busy, t_us * 1e-6);
  }
  if (st.ctx->trace) {
    st.ctx->trace->counter("busy", st.device_index, t_us, nlohmann::json{{"busy", busy ? 1 : 0}});
  }
}

engine::exec::Executor* executor(caf::stateful_actor<StageState>* self) {
  const auto& st = self->state;
  const auto d = static_cast<size_t>(st.device_index);
  return d < st.ctx->executors.size() ? st.ctx->executors[d].get() : nullptr;
}

// Records the execution [begin_s, end_s], reports busy time, sends the outputs and frees the
// device: without a message when nothing waits for it (device_gate.hpp), else with `done`.
void complete_run(caf::stateful_actor<StageState>* self, double begin_s, double end_s,
                  const RunInfo& info, const absl::Status& s, std::vector<Send>& out) {
  auto& st = self->state;
  set_device_busy(self, false);
  if (st.ctx->trace) {
    const engine::dataflow::LayerId layer = st.impl->layer();
    st.ctx->trace->complete(st.impl->name(), st.device_index, st.trace_tid, begin_s * 1e6,
                            (end_s - begin_s) * 1e6,
                            nlohmann::json{{"tokens", info.num_tokens},
                                           {"requests", info.num_requests},
                                           {"iteration", info.iteration},
                                           {"block", layer.block},
                                           {"index", layer.index},
                                           {"phase", st.ctx->topology.wiring}});
  }
  // Busy time goes to the coordinator before the outputs, so it is accounted before the
  // iteration these outputs complete: into its log (in its process), or as a message (from
  // another process; messages from one sender arrive in order).
  if (st.ctx->busy_log) {
    st.ctx->busy_log->add(st.device_index, begin_s, end_s);
  } else {
    self->send(st.ctx->actors.coordinator, busy_atom::value, st.device_index, begin_s, end_s);
  }
  if (!s.ok()) fail(self, s);
  if (!st.failed) flush(self, out);
  if (st.ctx->trace) {
    trace_depth(self, end_s * 1e6);
    if (const int64_t kv = st.impl->kv_bytes(); kv >= 0) {
      st.ctx->trace->counter("kv cache " + st.impl->name(), st.device_index, end_s * 1e6,
                             nlohmann::json{{"bytes", kv}});
    }
  }
  const int64_t ready = st.failed ? int64_t{0} : st.impl->ready_tokens();
  if (gate(self).finish_run(ready > 0)) return;
  self->send(st.ctx->actors.devices[st.device_index], done_atom::value, st.local_index, ready);
}

// Runs one batch from the μ-queue on the device the stage now holds (granted, or started
// directly): at once on real backends, or until the virtual clock reaches the modeled end.
void start_run(caf::stateful_actor<StageState>* self) {
  auto& st = self->state;
  const double begin_s = st.ctx->seconds_since_start(self->home_system().clock().now());
  set_device_busy(self, true);
  engine::exec::Executor* ex = executor(self);
  if (st.ctx->virtual_time && ex != nullptr) (void)ex->take_shared_work();  // (none before)
  std::vector<Send> out;
  RunInfo info;
  absl::Status s = st.impl->run(out, info);
  if (!st.ctx->virtual_time) {
    const double end_s = st.ctx->seconds_since_start(self->home_system().clock().now());
    return complete_run(self, begin_s, end_s, info, s, out);
  }
  // Virtual time: the stage is busy for the modeled duration plus the device kind's host
  // overheads ([cost]); its outputs leave when the clock reaches the end (ARCHITECTURE.md §4).
  const auto dev = static_cast<size_t>(st.device_index);
  const engine::dataflow::LayerId layer = st.impl->layer();
  double seconds =
      info.seconds + (dev < st.ctx->step_overhead_s.size()
                          ? st.ctx->step_overhead_s[dev][static_cast<size_t>(layer.kind)]
                          : 0.0);
  engine::exec::DeviceActivity::SharedWork work =
      ex != nullptr ? ex->take_shared_work() : engine::exec::DeviceActivity::SharedWork{};
  if (const uint64_t seed = st.ctx->topology.cost.spread_seed; seed != 0 && ex != nullptr) {
    // The measured run-to-run spread (engine/exec/run_spread.hpp): this stage's n-th run,
    // its contended work included, scaled by a mean-1 factor.
    if (const double sigma = ex->run_spread(layer.kind); sigma > 0) {
      // One stream per stage: its device and its index among the device's stages (unique
      // across the models of a colocated run, whose stages share the devices).
      const uint64_t stream =
          (static_cast<uint64_t>(st.device_index) << 32) ^ static_cast<uint32_t>(st.local_index);
      const double f = engine::exec::run_spread_factor(seed, stream, st.runs++, sigma);
      seconds *= f;
      work.scale(f);
    }
  }
  if (work.charged_s > seconds && work.charged_s > 0) {
    // A negative in-run correction (host_expert rows) larger than the run's uncontended rest:
    // the contended work shrinks in proportion, so the run still takes `seconds` at the share
    // it was charged at.
    work.scale(seconds / work.charged_s);
    work.charged_s = seconds;  // exactly, not a rounding away
  }
  if (work.alone_s > 0 && ex->activity() != nullptr) {
    // Expert work whose speed depends on the node's other devices: a shared run, its end
    // moved whenever one of them starts or ends a run (finish messages of older generations
    // are stale).
    // (A weak address: the callback lives in the run's DeviceActivity, which this stage's
    // own state reaches.)
    auto reschedule = [me = self->address()](double delay_s, uint64_t gen) {
      if (auto target = caf::actor_cast<caf::actor>(me)) {
        caf::delayed_anon_send(target, std::chrono::nanoseconds(std::llround(delay_s * 1e9)),
                               finish_atom::value, static_cast<int64_t>(gen));
      }
    };
    const auto [delay_s, gen] = ex->activity()->start_shared(
        st.device_index, begin_s, work, seconds - work.charged_s, std::move(reschedule));
    st.pending.emplace(PendingRun{begin_s, begin_s + delay_s, info, s, std::move(out), true});
    self->delayed_send(self, std::chrono::nanoseconds(std::llround(delay_s * 1e9)),
                       finish_atom::value, static_cast<int64_t>(gen));
    return;
  }
  st.pending.emplace(PendingRun{begin_s, begin_s + seconds, info, s, std::move(out)});
  self->delayed_send(self, std::chrono::nanoseconds(std::llround(seconds * 1e9)),
                     finish_atom::value, int64_t{0});
}

void fail(caf::stateful_actor<StageState>* self, const absl::Status& status) {
  if (self->state.failed) return;
  self->state.failed = true;
  self->send(self->state.ctx->actors.coordinator, failed_atom::value,
             self->state.impl->name() + ": " + std::string(status.message()));
}

caf::behavior stage_behavior(caf::stateful_actor<StageState>* self, RunContextPtr ctx,
                             std::shared_ptr<StageImpl> impl, int64_t device_index,
                             int32_t local_index, int64_t trace_tid) {
  self->state.impl = std::move(impl);
  self->state.ctx = std::move(ctx);
  self->state.device_index = device_index;
  self->state.local_index = local_index;
  self->state.trace_tid = trace_tid;
  return {
      [=](batch_atom, const engine::dataflow::TokenBatchPtr& batch) {
        auto& st = self->state;
        if (st.failed) return;
        std::vector<Send> now;
        if (absl::Status s = st.impl->enqueue(batch, now); !s.ok()) return fail(self, s);
        flush(self, now);
        trace_depth(self, now_us(self));
        const int64_t ready = st.impl->ready_tokens();
        if (ready <= 0) return;
        // An idle device with nothing waiting runs this stage at once. With another message
        // already in the mailbox the stage asks instead: the grant comes after that message,
        // which then joins the same run, as it always did.
        DeviceGate& g = gate(self);
        if (self->mailbox().empty()) {
          if (g.try_start()) return start_run(self);
        } else {
          g.announce();
        }
        self->send(st.ctx->actors.devices[st.device_index], ready_atom::value, st.local_index,
                   ready);
      },
      [=](grant_atom) { start_run(self); },
      [=](finish_atom, int64_t gen) {
        auto& st = self->state;
        if (!st.pending) return;
        if (st.pending->shared) {
          engine::exec::DeviceActivity* a = executor(self)->activity();
          if (!a->current(st.device_index, static_cast<uint64_t>(gen))) return;  // moved since
          st.pending->end_s = st.ctx->seconds_since_start(self->home_system().clock().now());
        } else if (gen != 0) {
          // A shared run's earlier projection (generations start at 1), left queued when that
          // run ended sooner: not this run's end.
          return;
        }
        PendingRun run = std::move(*st.pending);
        st.pending.reset();
        complete_run(self, run.begin_s, run.end_s, run.info, run.status, run.out);
      },
      [=](release_atom, int64_t request_id) { self->state.impl->release(request_id); },
      [=](kvrows_atom, const KvRowsPtr& rows) {
        if (self->state.failed) return;
        if (absl::Status s = self->state.impl->apply_kv_rows(*rows); !s.ok()) fail(self, s);
      },
      [=](kv_atom) -> int64_t { return self->state.impl->kv_bytes(); },
      [=](depth_atom) -> int64_t {
        return self->state.failed ? int64_t{0} : self->state.impl->ready_tokens();
      },
  };
}

}  // namespace

caf::actor spawn_stage(caf::actor_system& sys, RunContextPtr ctx, std::shared_ptr<StageImpl> impl,
                       int64_t device_index, int32_t local_index, int64_t trace_tid) {
  return sys.spawn(stage_behavior, std::move(ctx), std::move(impl), device_index, local_index,
                   trace_tid);
}

}  // namespace muflow::actors
