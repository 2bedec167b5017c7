// The devices' scheduling policy of a run (actors/wirings/device_policy.hpp): the topology's
// `[scheduler] policy` when it names one, else the wiring's default (AsyncMoE's wirings run its
// defragging scheduler, the barrier wirings FIFO); bad names fail with the file and key.
#include "actors/wirings/device_policy.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/topology/topology.hpp"

namespace muflow::actors {
namespace {

using ::testing::HasSubstr;

engine::topology::Topology topology(const std::string& wiring, const std::string& policy) {
  engine::topology::Topology t;
  t.source = "run.toml";
  t.wiring = wiring;
  t.scheduler.policy = policy;
  return t;
}

std::string policy_name(const std::string& wiring, const std::string& policy) {
  absl::StatusOr<std::unique_ptr<engine::serving::SchedulingPolicy>> p =
      make_device_policy(topology(wiring, policy));
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? (*p)->name() : "";
}

TEST(DevicePolicy, WiringDefaultWhereTheTopologyNamesNone) {
  EXPECT_EQ(engine::topology::Topology().scheduler.policy, "");
  EXPECT_EQ(policy_name("async", ""), "defrag");
  EXPECT_EQ(policy_name("async-replicated", ""), "defrag");
  for (const char* barrier : {"sync", "harmoeny", "moeshard", "exflow"}) {
    EXPECT_EQ(policy_name(barrier, ""), "fifo") << barrier;
  }
}

TEST(DevicePolicy, TheTopologysPolicyWins) {
  EXPECT_EQ(policy_name("async", "fifo"), "fifo");
  EXPECT_EQ(policy_name("async", "flfs"), "flfs");
  EXPECT_EQ(policy_name("sync", "defrag"), "defrag");
  EXPECT_EQ(policy_name("sync", "most-tokens"), "most-tokens");
}

TEST(DevicePolicy, TheDefaultTakesTheTopologysLookaheadAndDecay) {
  engine::topology::Topology t = topology("async", "");
  t.scheduler.defrag_lookahead = 1;
  t.scheduler.defrag_decay = 0.5;
  absl::StatusOr<std::unique_ptr<engine::serving::SchedulingPolicy>> p = make_device_policy(t);
  ASSERT_TRUE(p.ok()) << p.status();
  const auto* defrag = dynamic_cast<const engine::serving::DefragPolicy*>(p->get());
  ASSERT_NE(defrag, nullptr);
  // Block 0's stage with 1 token, block 1's with 4 and block 2's with 8: with K = 1 and
  // δ = 0.5, block 0 scores 1 + 0.5 · 4 = 3 (block 2 is beyond the lookahead).
  std::vector<engine::serving::StageStatus> stages(3);
  for (int b = 0; b < 3; ++b) stages[b].layer.block = b;
  stages[0].queued_tokens = 1;
  stages[1].queued_tokens = 4;
  stages[2].queued_tokens = 8;
  EXPECT_DOUBLE_EQ(defrag->scores(stages)[0], 3.0);

  t.scheduler.defrag_decay = 2.0;
  absl::StatusOr<std::unique_ptr<engine::serving::SchedulingPolicy>> bad = make_device_policy(t);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("run.toml: key 'scheduler.policy'"));
  EXPECT_THAT(bad.status().message(), HasSubstr("decay"));
}

TEST(DevicePolicy, UnknownNamesFailWithTheFileAndKey) {
  absl::StatusOr<std::unique_ptr<engine::serving::SchedulingPolicy>> p =
      make_device_policy(topology("sync", "lifo"));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("run.toml: key 'scheduler.policy'"));
  EXPECT_THAT(p.status().message(), HasSubstr("lifo"));

  p = make_device_policy(topology("ring", ""));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("run.toml: key 'wiring'"));
  EXPECT_THAT(p.status().message(), HasSubstr("ring"));
}

}  // namespace
}  // namespace muflow::actors
