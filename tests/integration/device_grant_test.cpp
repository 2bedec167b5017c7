// The device actor (actors/device.cpp) grants its stages one at a time in its policy's order.
// Under the FIFO policy without batch hold it keeps its queued stages in ready order and pops
// the earliest instead of asking FifoPolicy to scan them all (#19 item 6). These tests drive
// that device and one whose policy delegates to FifoPolicy::pick (so it scans) with the same
// random ready/done script, and check that both grant the stage a model of FIFO names: the
// queued stage that became ready earliest.
#include <gtest/gtest.h>

#include <caf/all.hpp>
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
    devices.push_back(spawn_device(sys, ctx, 0, std::move(stages), policy));
  }
  // The model: each stage's queued tokens and the order in which stages became ready.
  std::vector<int64_t> queued(kStages, 0);
  std::vector<uint64_t> ready_at(kStages, 0);
  uint64_t clock = 0;
  uint64_t state = 7;
  const auto next = [&state](uint64_t mod) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int64_t>((state >> 33) % mod);
  };
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
      for (const caf::actor& d : devices) self->send(d, ready_atom::value, stage, tokens);
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

}  // namespace
}  // namespace muflow::actors
