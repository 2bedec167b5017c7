// The device actor (actors/device.cpp) grants its stages one at a time in its policy's order.
// Under the FIFO policy without batch hold it keeps its queued stages in ready order and pops
// the earliest instead of asking FifoPolicy to scan them all (#19 item 6). These tests drive
// that device and one whose policy delegates to FifoPolicy::pick (so it scans) with the same
// random ready/done script, and check that both grant the stage a model of FIFO names: the
// queued stage that became ready earliest. A third test drives a device whose stages may
// start without a grant and end without `done` (actors/device_gate.hpp) and checks that a
// stage starts on its own exactly when the device would have granted it at once.
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/device.hpp"
#include "actors/messages.hpp"
#include "actors/run_context.hpp"
#include "engine/serving/scheduling_policy.hpp"
#include "started_wiring.hpp"

namespace muflow::actors {
namespace {

using engine::dataflow::StageKind;
using engine::serving::FifoPolicy;
using engine::serving::SchedulingPolicy;
using engine::serving::StageStatus;

// FIFO by the policy's scan: not a FifoPolicy, so the device asks it at every grant.
class ScanningFifo final : public SchedulingPolicy {
 public:
  int64_t pick(const std::vector<StageStatus>& stages) const override {
    return FifoPolicy().pick(stages);
  }
  const char* name() const override { return "scanning-fifo"; }
};

constexpr int kStages = 6;

// The tests' random script: next(mod) is a draw in [0, mod) from a fixed-seed LCG.
class Script {
 public:
  explicit Script(uint64_t seed) : state_(seed) {}
  int64_t operator()(uint64_t mod) {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int64_t>((state_ >> 33) % mod);
  }

 private:
  uint64_t state_;
};

// A stage stand-in: tells `observer` (device_tag, stage) when it is granted. (A function with
// arguments: CAF 0.17 dereferences a null argument tuple when it spawns a lambda without any.)
caf::behavior forwarder(caf::event_based_actor* self, caf::actor observer, int device_tag,
                        int stage) {
  return {[=](grant_atom) { self->send(observer, grant_atom::value, device_tag, stage); }};
}

// A sync run context on one cpu device whose block-0 attention stages are actors that tell
// `observer` (device_tag, stage) when they are granted.
std::shared_ptr<RunContext> context(caf::actor_system& sys, const caf::actor& observer,
                                    int device_tag) {
  std::shared_ptr<RunContext> ctx = testing::started_wiring("sync", 1, 1, 2, 1);
  ctx->actors.attention.resize(1);
  for (int i = 0; i < kStages; ++i) {
    ctx->actors.attention[0].push_back(sys.spawn(forwarder, observer, device_tag, i));
  }
  return ctx;
}

TEST(DeviceGrant, FifoPopGrantsWhatTheScanGrantsAndWhatFifoNames) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::vector<caf::actor> devices;
  // Gates without direct starts: every start here is a grant (the stages are stand-ins).
  std::vector<std::shared_ptr<DeviceGate>> gates;
  for (int tag = 0; tag < 2; ++tag) {
    std::shared_ptr<RunContext> ctx = context(sys, self, tag);
    std::vector<DeviceStage> stages;
    for (int i = 0; i < kStages; ++i) stages.push_back({ctx, {StageKind::kAttention, 0, i}});
    std::shared_ptr<const SchedulingPolicy> policy;
    if (tag == 0) {
      policy = std::make_shared<const FifoPolicy>();
    } else {
      policy = std::make_shared<const ScanningFifo>();
    }
    gates.push_back(std::make_shared<DeviceGate>(false));
    devices.push_back(spawn_device(sys, ctx, 0, std::move(stages), policy, gates.back()));
  }
  // The model: each stage's queued tokens and the order in which stages became ready.
  std::vector<int64_t> queued(kStages, 0);
  std::vector<uint64_t> ready_at(kStages, 0);
  uint64_t clock = 0;
  Script next(7);
  const auto report = [&](int32_t stage, int64_t tokens) {
    if (queued[stage] <= 0 && tokens > 0) ready_at[stage] = clock++;
    queued[stage] = tokens;
  };
  int running = -1;  // the stage the devices granted and have not been told done
  int grants = 0;
  // An idle device with a queued stage grants at once: check both grants against the model.
  const auto settle = [&](int step) {
    if (running >= 0) return;
    int expect = -1;
    for (int i = 0; i < kStages; ++i) {
      if (queued[i] > 0 && (expect < 0 || ready_at[i] < ready_at[expect])) expect = i;
    }
    if (expect < 0) return;  // nothing queued: no grant until a stage reports tokens
    std::vector<int> got(2, -1);
    for (int n = 0; n < 2; ++n) {
      self->receive(
          [&](grant_atom, int tag, int stage) { got[static_cast<size_t>(tag)] = stage; },
          caf::after(std::chrono::seconds(10)) >> [&] { ADD_FAILURE() << "no grant at " << step; });
    }
    EXPECT_EQ(got[0], expect) << "popped FIFO, step " << step;
    EXPECT_EQ(got[1], expect) << "scanned FIFO, step " << step;
    queued[expect] = 0;  // a granted stage re-reports with done
    running = expect;
    ++grants;
  };
  for (int step = 0; step < 300 && !HasFailure(); ++step) {
    // A few stages report tokens; a running stage may too (its μ-queue got a batch), and its
    // `done` then re-reports what it holds.
    for (int k = next(3); k > 0; --k) {
      const auto stage = static_cast<int32_t>(next(kStages));
      const int64_t tokens = 1 + next(9);
      report(stage, tokens);
      for (size_t d = 0; d < devices.size(); ++d) {
        gates[d]->announce();  // what a stage does before it sends `ready`
        self->send(devices[d], ready_atom::value, stage, tokens);
      }
      settle(step);
    }
    if (running >= 0 && next(2) == 0) {  // the running stage finishes, maybe with tokens left
      const int32_t stage = running;
      const int64_t left = next(2) == 0 ? 0 : 1 + next(5);
      running = -1;
      report(stage, left);
      for (const caf::actor& d : devices) self->send(d, done_atom::value, stage, left);
      settle(step);
    }
  }
  EXPECT_GT(grants, 50) << "the script exercised the grants";
  for (const caf::actor& d : devices) self->send_exit(d, caf::exit_reason::user_shutdown);
}

TEST(DeviceGrant, DirectStartsAndQuietEndsAreTheGrantsFifoWouldMake) {
  // CAF's deterministic scheduler (the sim's): after sched.run() every message sent so far has
  // been handled, so the gate's state is the device actor's.
  caf::actor_system_config cfg;
  cfg.set("scheduler.policy", caf::atom("testing"));
  caf::actor_system sys{cfg};
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  caf::scoped_actor self{sys};
  std::shared_ptr<RunContext> ctx = context(sys, self, 0);
  std::vector<DeviceStage> stages;
  for (int i = 0; i < kStages; ++i) stages.push_back({ctx, {StageKind::kAttention, 0, i}});
  auto gate = std::make_shared<DeviceGate>(true);
  caf::actor device =
      spawn_device(sys, ctx, 0, std::move(stages), std::make_shared<const FifoPolicy>(), gate);
  sched.run();

  std::vector<int64_t> queued(kStages, 0);  // the model: queued tokens per stage
  std::vector<uint64_t> ready_at(kStages, 0);
  uint64_t clock = 0;
  Script next(11);
  const auto any_queued = [&] {
    for (int64_t q : queued) {
      if (q > 0) return true;
    }
    return false;
  };
  int running = -1;
  int direct = 0, granted = 0, quiet = 0;
  // Runs the actors; an idle device with queued stages must then have granted FIFO's choice,
  // and nothing else may have been granted.
  const auto settle = [&](int step) {
    sched.run();
    int got = -1, grants = 0;
    for (;;) {
      bool more = false;
      self->receive([&](grant_atom, int, int stage) { got = stage, ++grants, more = true; },
                    caf::after(std::chrono::seconds(0)) >> [] {});
      if (!more) break;
    }
    int expect = -1;
    if (running < 0) {
      for (int i = 0; i < kStages; ++i) {
        if (queued[i] > 0 && (expect < 0 || ready_at[i] < ready_at[expect])) expect = i;
      }
    }
    ASSERT_EQ(grants, expect < 0 ? 0 : 1) << "step " << step;
    if (expect < 0) return;
    EXPECT_EQ(got, expect) << "step " << step;
    queued[expect] = 0;
    running = expect;
    ++granted;
  };
  // Fewer reports and shorter runs than above, so that the device is often idle and empty.
  for (int step = 0; step < 400 && !HasFailure(); ++step) {
    for (int k = next(3) / 2; k > 0; --k) {
      const auto stage = static_cast<int32_t>(next(kStages));
      const int64_t tokens = 1 + next(9);
      // The device would grant this stage at once: idle, nothing queued.
      const bool at_once = running < 0 && !any_queued();
      if (queued[stage] <= 0 && tokens > 0) ready_at[stage] = clock++;
      queued[stage] = tokens;
      const bool started = gate->try_start();
      ASSERT_EQ(started, at_once) << "step " << step;
      if (started) {
        queued[stage] = 0;
        running = stage;
        ++direct;
        continue;
      }
      self->send(device, ready_atom::value, stage, tokens);
      settle(step);
    }
    if (running >= 0 && next(4) != 0) {
      const int32_t stage = running;
      // What it holds after the run: at least what it reported while it ran (a run takes
      // the μ-queue as it was when it started).
      int64_t left = next(4) != 0 ? 0 : 1 + next(5);
      if (queued[stage] > 0) left = queued[stage] + next(3);
      running = -1;
      if (queued[stage] <= 0 && left > 0) ready_at[stage] = clock++;
      queued[stage] = left;
      const bool nothing_waits = !any_queued();
      const bool freed = gate->finish_run(left > 0);
      ASSERT_EQ(freed, nothing_waits) << "step " << step;
      if (freed) {
        ++quiet;
        continue;
      }
      self->send(device, done_atom::value, stage, left);
      settle(step);
    }
  }
  EXPECT_GT(direct, 20) << "the script exercised direct starts";
  EXPECT_GT(granted, 20) << "and grants";
  EXPECT_GT(quiet, 10) << "and ends without done";
  self->send_exit(device, caf::exit_reason::user_shutdown);
  sched.run();
}

}  // namespace
}  // namespace muflow::actors
