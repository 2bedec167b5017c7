// DeviceActivity (engine/exec/device_activity.hpp): busy devices counted per node, the asking
// device itself excluded; marking a device twice counts it once.
#include "engine/exec/device_activity.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace muflow::engine::exec
