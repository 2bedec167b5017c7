// Expert placement (engine/planning/placement.hpp): round-robin e mod D, validated explicit
// placements, experts_on.

#include "engine/planning/placement.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace muflow::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

topology::Topology topology_with(int num_devices) {
  topology::Topology t;
  t.source = "test.toml";
  for (int d = 0; d < num_devices; ++d) {
    topology::DeviceSpec dev;
    dev.name = "cpu" + std::to_string(d);
    t.devices.push_back(dev);
  }
  return t;
}

TEST(Placement, RoundRobin) {
  const topology::Topology t = topology_with(3);
  absl::StatusOr<planning::Placement> p = planning::make_placement(t, 8);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->num_devices, 3);
  EXPECT_THAT(p->expert_device, ElementsAre(0, 1, 2, 0, 1, 2, 0, 1));
  EXPECT_THAT(p->experts_on(0), ElementsAre(0, 3, 6));
  EXPECT_THAT(p->experts_on(1), ElementsAre(1, 4, 7));
  EXPECT_THAT(p->experts_on(2), ElementsAre(2, 5));
  EXPECT_THAT(p->experts_on(3), IsEmpty());
}

TEST(Placement, MoreDevicesThanExperts) {
  absl::StatusOr<planning::Placement> p = planning::make_placement(topology_with(4), 2);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->expert_device, ElementsAre(0, 1));
  EXPECT_THAT(p->experts_on(2), IsEmpty());
}

TEST(Placement, NoDevicesIsAnError) {
  absl::StatusOr<planning::Placement> p = planning::make_placement(topology_with(0), 4);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("test.toml"));
}

TEST(Placement, Explicit) {
  topology::Topology t = topology_with(2);
  t.placement = "explicit";
  t.expert_device = {1, 1, 0, 1};
  absl::StatusOr<planning::Placement> p = planning::make_placement(t, 4);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->expert_device, ElementsAre(1, 1, 0, 1));
  EXPECT_THAT(p->experts_on(0), ElementsAre(2));
  EXPECT_THAT(p->experts_on(1), ElementsAre(0, 1, 3));
}

TEST(Placement, ExplicitWrongLength) {
  topology::Topology t = topology_with(2);
  t.placement = "explicit";
  for (std::vector<int64_t> devices : {std::vector<int64_t>{0, 1, 0}, std::vector<int64_t>{},
                                       std::vector<int64_t>{0, 1, 0, 1, 0}}) {
    t.expert_device = devices;
    absl::StatusOr<planning::Placement> p = planning::make_placement(t, 4);
    ASSERT_FALSE(p.ok()) << devices.size();
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(), HasSubstr("placement.experts"));
    EXPECT_THAT(p.status().message(), HasSubstr("test.toml"));
  }
}

TEST(Placement, ExplicitDeviceOutOfRange) {
  topology::Topology t = topology_with(2);
  t.placement = "explicit";
  for (int64_t bad : {int64_t{2}, int64_t{-1}, int64_t{100}}) {
    t.expert_device = {0, 1, bad, 0};
    absl::StatusOr<planning::Placement> p = planning::make_placement(t, 4);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(), HasSubstr("placement.experts"));
    EXPECT_THAT(p.status().message(), HasSubstr("[2]"));  // the offending entry
  }
}

}  // namespace
}  // namespace muflow::engine

namespace muflow::engine {
namespace {

// async: attention DP ranks on the first devices, experts round-robin over the others.
TEST(Placement, AsyncDisaggregatesAttentionAndExperts) {
  topology::Topology t = topology_with(8);
  t.wiring = "async";
  absl::StatusOr<planning::Placement> p =
      planning::make_placement(t, 8, /*disaggregated_attention=*/true);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->rank_device, ElementsAre(0, 1, 2, 3));  // default: half the devices
  EXPECT_THAT(p->expert_device, ElementsAre(4, 5, 6, 7, 4, 5, 6, 7));
  t.attention_devices = 3;
  t.placement = "contiguous";
  p = planning::make_placement(t, 8, /*disaggregated_attention=*/true);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->rank_device, ElementsAre(0, 1, 2));
  EXPECT_THAT(p->expert_device, ElementsAre(3, 3, 4, 4, 5, 5, 6, 6));
  // The sync wiring ignores attention_devices: every device is a rank.
  t.wiring = "sync";
  p = planning::make_placement(t, 8);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->rank_device.size(), 8u);
}

TEST(Placement, AsyncRejectsExpertsOnAttentionDevicesAndTinyClusters) {
  topology::Topology t = topology_with(4);
  t.wiring = "async";
  t.placement = "explicit";
  t.expert_device = {2, 3, 1, 2};
  absl::StatusOr<planning::Placement> p =
      planning::make_placement(t, 4, /*disaggregated_attention=*/true);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              HasSubstr("key 'placement.experts'[2] = 1; expected an expert device index in [2, 4)"));
  absl::StatusOr<planning::Placement> one = [] {
    topology::Topology u = topology_with(1);
    u.wiring = "async";
    return planning::make_placement(u, 4, /*disaggregated_attention=*/true);
  }();
  ASSERT_FALSE(one.ok());
  EXPECT_THAT(one.status().message(), HasSubstr("needs at least 2 devices"));
}

}  // namespace
}  // namespace muflow::engine
