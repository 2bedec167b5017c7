// Device scheduling policies (engine/scheduling_policy.hpp): FIFO and most-tokens-first picks
// on hand-built stage lists, and the factory's names and errors.

#include "engine/scheduling_policy.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace muflow::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

StageStatus stage(int32_t block, int64_t queued, uint64_t ready_seq) {
  StageStatus s;
  s.layer.kind = StageKind::kExpert;
  s.layer.block = block;
  s.queued_tokens = queued;
  s.ready_seq = ready_seq;
  return s;
}

TEST(FifoPolicy, NoneReady) {
  FifoPolicy fifo;
  EXPECT_EQ(fifo.pick({}), -1);
  EXPECT_EQ(fifo.pick({stage(0, 0, 1), stage(1, 0, 0)}), -1);
  EXPECT_EQ(fifo.pick({stage(0, -3, 1)}), -1);
}

TEST(FifoPolicy, EarliestReadySeqAmongQueuedStages) {
  FifoPolicy fifo;
  // Index 1 has the smallest ready_seq but no tokens; index 3 is the earliest ready one.
  EXPECT_EQ(fifo.pick({stage(0, 5, 9), stage(1, 0, 1), stage(2, 100, 7), stage(3, 1, 4)}), 3);
  EXPECT_EQ(fifo.pick({stage(0, 1, 2), stage(1, 1, 3)}), 0);
  EXPECT_EQ(fifo.pick({stage(0, 1, 3), stage(1, 1, 2)}), 1);
  // Ties on ready_seq → lower index.
  EXPECT_EQ(fifo.pick({stage(0, 0, 0), stage(1, 2, 5), stage(2, 9, 5)}), 1);
  EXPECT_STREQ(fifo.name(), "fifo");
}

TEST(MostTokensPolicy, NoneReady) {
  MostTokensPolicy mt;
  EXPECT_EQ(mt.pick({}), -1);
  EXPECT_EQ(mt.pick({stage(0, 0, 0), stage(1, 0, 1)}), -1);
}

TEST(MostTokensPolicy, MaxQueuedThenEarliestThenIndex) {
  MostTokensPolicy mt;
  EXPECT_EQ(mt.pick({stage(0, 3, 0), stage(1, 8, 5), stage(2, 7, 1)}), 1);
  // Tie on tokens: earliest ready_seq wins even at a higher index.
  EXPECT_EQ(mt.pick({stage(0, 8, 6), stage(1, 2, 0), stage(2, 8, 3)}), 2);
  // Tie on tokens and ready_seq: lower index.
  EXPECT_EQ(mt.pick({stage(0, 1, 0), stage(1, 8, 3), stage(2, 8, 3)}), 1);
  // A later, larger queue beats an earlier, smaller one.
  EXPECT_EQ(mt.pick({stage(0, 4, 0), stage(1, 0, 0), stage(2, 5, 9)}), 2);
  EXPECT_STREQ(mt.name(), "most-tokens");
}

TEST(MakeSchedulingPolicy, KnownNames) {
  EXPECT_THAT(scheduling_policy_names(), ElementsAre("fifo", "most-tokens"));
  for (const std::string& name : scheduling_policy_names()) {
    absl::StatusOr<std::unique_ptr<SchedulingPolicy>> p = make_scheduling_policy(name);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ((*p)->name(), name);
  }
  // The two built policies behave differently on the same input.
  const std::vector<StageStatus> stages = {stage(0, 1, 0), stage(1, 9, 1)};
  EXPECT_EQ((*make_scheduling_policy("fifo"))->pick(stages), 0);
  EXPECT_EQ((*make_scheduling_policy("most-tokens"))->pick(stages), 1);
}

TEST(MakeSchedulingPolicy, UnknownNameListsKnownOnes) {
  for (const char* bad : {"lifo", "", "FIFO", "most_tokens"}) {
    absl::StatusOr<std::unique_ptr<SchedulingPolicy>> p = make_scheduling_policy(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(), HasSubstr("fifo"));
    EXPECT_THAT(p.status().message(), HasSubstr("most-tokens"));
    EXPECT_THAT(p.status().message(), HasSubstr(std::string("'") + bad + "'"));
  }
}

}  // namespace
}  // namespace muflow::engine
