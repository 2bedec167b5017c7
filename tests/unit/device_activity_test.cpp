// DeviceActivity (engine/exec/device_activity.hpp): busy devices counted per node, the asking
// device itself excluded; marking a device twice counts it once; shared runs progress at the
// rate their node's busy peers leave them and are told each new end (closed-form cases).
#include "engine/exec/device_activity.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace muflow::engine::exec {
namespace {

TEST(DeviceActivity, CountsBusyPeersOnTheSameNodeOnly) {
  DeviceActivity a({0, 0, 0, 1});
  EXPECT_EQ(a.node_size(0), 3);
  EXPECT_EQ(a.node_size(3), 1);
  EXPECT_EQ(a.busy_peers(0), 0);
  a.set_busy(1, true);
  a.set_busy(1, true);  // idempotent
  EXPECT_EQ(a.busy_peers(0), 1);
  EXPECT_EQ(a.busy_peers(1), 0);  // itself not counted
  a.set_busy(3, true);            // another node
  EXPECT_EQ(a.busy_peers(0), 1);
  EXPECT_EQ(a.busy_peers(3), 0);
  a.set_busy(0, true);
  a.set_busy(2, true);
  EXPECT_EQ(a.busy_peers(0), 2);
  EXPECT_EQ(a.busy_peers(1), 2);
  a.set_busy(1, false);
  a.set_busy(1, false);
  EXPECT_EQ(a.busy_peers(0), 1);
  EXPECT_EQ(a.busy_peers(1), 2);
}

// What a shared run's owner was told: (seconds to the new end, generation).
struct Told {
  std::vector<std::pair<double, uint64_t>> calls;
  DeviceActivity::Reschedule callback() {
    return [this](double delay_s, uint64_t gen) { calls.emplace_back(delay_s, gen); };
  }
};

// One node of two devices, calibrated with one peer: a run's contended work takes 1 s alone
// and 2 s with the peer busy. Device 0 starts at 0 (alone: 1 s, then 0.25 s fixed: ends at
// 1.25); device 1 goes busy at 0.5, so device 0's last 0.5 alone-seconds take 1 s (ends at
// 1.75) and device 1's run starts shared (2 s: 2.5); when device 0 ends at 1.75, device 1 has
// 1 − 1.25 / 2 = 0.375 alone-seconds left, now alone (ends at 2.125).
TEST(DeviceActivity, SharedRunsSlowDownWhileTheyOverlapWhicheverStartedFirst) {
  DeviceActivity a({0, 0});
  Told t0, t1;
  const DeviceActivity::SharedWork w{1.0, 2.0, 1.0, 1};
  a.set_busy(0, true, 0.0);
  const auto [d0, g0] = a.start_shared(0, 0.0, w, 0.25, t0.callback());
  EXPECT_DOUBLE_EQ(d0, 1.25);
  EXPECT_TRUE(a.current(0, g0));
  a.set_busy(1, true, 0.5);
  ASSERT_EQ(t0.calls.size(), 1u);
  EXPECT_DOUBLE_EQ(t0.calls[0].first, 1.25);  // 0.5 alone-s at half speed, then 0.25 fixed
  EXPECT_FALSE(a.current(0, g0));             // the first finish message is stale
  EXPECT_TRUE(a.current(0, t0.calls[0].second));
  const auto [d1, g1] = a.start_shared(1, 0.5, w, 0.0, t1.callback());
  EXPECT_DOUBLE_EQ(d1, 2.0);
  EXPECT_TRUE(t0.calls.size() == 1u);  // starting a shared run on a busy device moves nothing
  a.set_busy(0, false, 1.75);          // device 0's run ends
  EXPECT_FALSE(a.current(0, t0.calls[0].second));
  ASSERT_EQ(t1.calls.size(), 1u);
  EXPECT_DOUBLE_EQ(t1.calls[0].first, 0.375);
  EXPECT_FALSE(a.current(1, g1));
  EXPECT_TRUE(a.current(1, t1.calls[0].second));
}

// Two runs starting at one instant on an idle node: whichever starts first is slowed by the
// second as much as the second by it, so equal work ends together.
TEST(DeviceActivity, SimultaneousEqualRunsEndTogether) {
  DeviceActivity a({0, 0});
  Told t0, t1;
  const DeviceActivity::SharedWork w{0.4, 1.0, 0.4, 1};
  a.set_busy(0, true, 3.0);
  const double first = a.start_shared(0, 3.0, w, 0.0, t0.callback()).first;
  EXPECT_DOUBLE_EQ(first, 0.4);  // alone, as far as anyone knows yet
  a.set_busy(1, true, 3.0);
  const double second = a.start_shared(1, 3.0, w, 0.0, t1.callback()).first;
  ASSERT_EQ(t0.calls.size(), 1u);
  EXPECT_DOUBLE_EQ(t0.calls[0].first, 1.0);
  EXPECT_DOUBLE_EQ(second, 1.0);
}

// A share capped at 1 (more busy peers than the calibration had) and a run in its fixed rest
// keep their ends: no new generation, no message.
TEST(DeviceActivity, RunsWhoseRateCannotChangeAreNotMoved) {
  DeviceActivity a({0, 0, 0});
  Told t0;
  a.set_busy(0, true, 0.0);
  a.set_busy(1, true, 0.0);
  const auto [d0, g0] = a.start_shared(0, 0.0, {1.0, 3.0, 3.0, 1}, 1.0, t0.callback());
  EXPECT_DOUBLE_EQ(d0, 4.0);  // shared from the start: 3 s, then 1 s fixed
  a.set_busy(2, true, 1.0);   // a second busy peer: the share stays 1
  EXPECT_TRUE(t0.calls.empty());
  a.set_busy(1, false, 3.5);  // in its fixed rest since 3.0
  a.set_busy(2, false, 3.6);
  EXPECT_TRUE(t0.calls.empty());
  EXPECT_TRUE(a.current(0, g0));
}

}  // namespace
}  // namespace muflow::engine::exec
