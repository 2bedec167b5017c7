// Device scheduling policies (engine/serving/scheduling_policy.hpp): FIFO and most-tokens-first picks
// on hand-built stage lists, and the factory's names and errors.

#include "engine/serving/scheduling_policy.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace muflow::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

serving::StageStatus stage(int32_t block, int64_t queued, uint64_t ready_seq) {
  serving::StageStatus s;
  s.layer.kind = dataflow::StageKind::kExpert;
  s.layer.block = block;
  s.queued_tokens = queued;
  s.ready_seq = ready_seq;
  return s;
}

TEST(FifoPolicy, NoneReady) {
  serving::FifoPolicy fifo;
  EXPECT_EQ(fifo.pick({}), -1);
  EXPECT_EQ(fifo.pick({stage(0, 0, 1), stage(1, 0, 0)}), -1);
  EXPECT_EQ(fifo.pick({stage(0, -3, 1)}), -1);
}

TEST(FifoPolicy, EarliestReadySeqAmongQueuedStages) {
  serving::FifoPolicy fifo;
  // Index 1 has the smallest ready_seq but no tokens; index 3 is the earliest ready one.
  EXPECT_EQ(fifo.pick({stage(0, 5, 9), stage(1, 0, 1), stage(2, 100, 7), stage(3, 1, 4)}), 3);
  EXPECT_EQ(fifo.pick({stage(0, 1, 2), stage(1, 1, 3)}), 0);
  EXPECT_EQ(fifo.pick({stage(0, 1, 3), stage(1, 1, 2)}), 1);
  // Ties on ready_seq → lower index.
  EXPECT_EQ(fifo.pick({stage(0, 0, 0), stage(1, 2, 5), stage(2, 9, 5)}), 1);
  EXPECT_STREQ(fifo.name(), "fifo");
}

TEST(MostTokensPolicy, NoneReady) {
  serving::MostTokensPolicy mt;
  EXPECT_EQ(mt.pick({}), -1);
  EXPECT_EQ(mt.pick({stage(0, 0, 0), stage(1, 0, 1)}), -1);
}

TEST(MostTokensPolicy, MaxQueuedThenEarliestThenIndex) {
  serving::MostTokensPolicy mt;
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
  EXPECT_THAT(serving::scheduling_policy_names(),
              ElementsAre("fifo", "most-tokens", "flfs", "defrag"));
  for (const std::string& name : serving::scheduling_policy_names()) {
    absl::StatusOr<std::unique_ptr<serving::SchedulingPolicy>> p =
        serving::make_scheduling_policy(name);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ((*p)->name(), name);
  }
  // The two built policies behave differently on the same input.
  const std::vector<serving::StageStatus> stages = {stage(0, 1, 0), stage(1, 9, 1)};
  EXPECT_EQ((*serving::make_scheduling_policy("fifo"))->pick(stages), 0);
  EXPECT_EQ((*serving::make_scheduling_policy("most-tokens"))->pick(stages), 1);
}

TEST(MakeSchedulingPolicy, UnknownNameListsKnownOnes) {
  for (const char* bad : {"lifo", "", "FIFO", "most_tokens"}) {
    absl::StatusOr<std::unique_ptr<serving::SchedulingPolicy>> p =
        serving::make_scheduling_policy(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(), HasSubstr("fifo"));
    EXPECT_THAT(p.status().message(), HasSubstr("most-tokens"));
    EXPECT_THAT(p.status().message(), HasSubstr(std::string("'") + bad + "'"));
  }
}

}  // namespace
}  // namespace muflow::engine

// ---- FLFS and the defragging scheduler (AsyncMoE §3.4, Algorithm 1) ----------------------

namespace muflow::engine {
namespace {

serving::StageStatus at_block(int32_t block, int32_t index, int64_t queued, uint64_t seq) {
  serving::StageStatus s;
  s.layer = {dataflow::StageKind::kExpert, block, index};
  s.queued_tokens = queued;
  s.ready_seq = seq;
  return s;
}

TEST(FirstLayerFirst, PicksTheLowestReadyBlock) {
  serving::FirstLayerFirstPolicy flfs;
  std::vector<serving::StageStatus> s = {at_block(2, 0, 20, 0), at_block(0, 1, 0, 1),
                                         at_block(1, 0, 1, 5), at_block(1, 1, 9, 2)};
  EXPECT_EQ(flfs.pick(s), 3);  // block 1 (block 0 has nothing); earlier ready of the two
  s[1].queued_tokens = 1;
  EXPECT_EQ(flfs.pick(s), 1);
  for (auto& x : s) x.queued_tokens = 0;
  EXPECT_EQ(flfs.pick(s), -1);
}

TEST(Defrag, ScoresFollowAlgorithm1ByHand) {
  // Blocks 0..2 (N_B = 3), K = 4, δ = 0.8; mean queue per block: b0 2, b1 (10+0)/2 = 5, b2 6.
  serving::DefragPolicy defrag(4, 0.8);
  std::vector<serving::StageStatus> s = {at_block(0, 0, 2, 0), at_block(1, 0, 10, 1),
                                         at_block(1, 1, 0, 2), at_block(2, 0, 6, 3)};
  const std::vector<double> score = defrag.scores(s);
  EXPECT_NEAR(score[0], 2 + 0.8 * 5 + 0.64 * 6 + 0.512 * 2 + 0.4096 * 5, 1e-12);
  EXPECT_NEAR(score[1], 10 + 0.8 * 6 + 0.64 * 2 + 0.512 * 5 + 0.4096 * 6, 1e-12);
  EXPECT_EQ(score[2], 0.0);  // empty queues are never scheduled
  EXPECT_NEAR(score[3], 6 + 0.8 * 2 + 0.64 * 5 + 0.512 * 6 + 0.4096 * 2, 1e-12);
  EXPECT_EQ(defrag.pick(s), 1);
}

TEST(Defrag, PrefersTheLayerBeforeADenseWaveOverTheFullestQueue) {
  // MTFS would run block 1 (6 tokens); block 0's successor holds the wave, so defrag runs it.
  std::vector<serving::StageStatus> s = {at_block(0, 0, 5, 0), at_block(1, 0, 6, 1),
                                         at_block(2, 0, 0, 2)};
  EXPECT_EQ(serving::MostTokensPolicy().pick(s), 1);
  EXPECT_EQ(serving::DefragPolicy().pick(s), 0);
}

TEST(Defrag, DoesNotLetANewRequestPreemptTheMainWave) {
  // A fresh token at block 0 vs the main wave of 20 at block 2 (4 blocks): FLFS runs the
  // newcomer (the starvation of §5.3), defrag keeps the wave moving.
  std::vector<serving::StageStatus> s = {at_block(0, 0, 1, 5), at_block(1, 0, 0, 0),
                                         at_block(2, 0, 20, 1), at_block(3, 0, 0, 0)};
  EXPECT_EQ(serving::FirstLayerFirstPolicy().pick(s), 0);
  EXPECT_EQ(serving::DefragPolicy().pick(s), 2);
  EXPECT_EQ(serving::DefragPolicy().pick({}), -1);
}

// K and δ are `[scheduler] defrag_lookahead` / `defrag_decay`: K counts the blocks after the
// stage's own (DisagMoE main: 3, its later branches: 7); K = 0 or δ = 0 is most-tokens.
TEST(Defrag, LookaheadAndDecayAreParameters) {
  // 8 blocks; queues: b0 3, b2 4, b5 9.
  std::vector<serving::StageStatus> s = {at_block(0, 0, 3, 0), at_block(2, 0, 4, 1),
                                         at_block(5, 0, 9, 2), at_block(7, 0, 0, 3)};
  const std::vector<double> k3 = serving::DefragPolicy(3, 0.8).scores(s);
  EXPECT_NEAR(k3[0], 3 + 0.64 * 4, 1e-12);        // sees b1..b3
  EXPECT_NEAR(k3[1], 4 + 0.512 * 9, 1e-12);       // sees b3..b5
  EXPECT_NEAR(k3[2], 9 + 0.512 * 3, 1e-12);       // sees b6, b7, b0
  const std::vector<double> k7 = serving::DefragPolicy(7, 0.8).scores(s);
  EXPECT_NEAR(k7[0], 3 + 0.64 * 4 + 0.32768 * 9, 1e-12);  // b1..b7: b5 at δ^5
  EXPECT_NEAR(k7[1], 4 + 0.512 * 9 + std::pow(0.8, 6) * 3, 1e-12);  // b3..b9 mod 8: b0 at δ^6
  const std::vector<double> half = serving::DefragPolicy(3, 0.5).scores(s);
  EXPECT_NEAR(half[0], 3 + 0.25 * 4, 1e-12);
  for (const serving::DefragPolicy& greedy :
       {serving::DefragPolicy(0, 0.8), serving::DefragPolicy(5, 0.0)}) {
    EXPECT_EQ(greedy.scores(s)[2], 9.0);
    EXPECT_EQ(greedy.pick(s), serving::MostTokensPolicy().pick(s));
  }
  auto factory = serving::make_scheduling_policy("defrag", 7, 0.5);
  ASSERT_TRUE(factory.ok());
  EXPECT_NEAR(dynamic_cast<const serving::DefragPolicy&>(**factory).scores(s)[0],
              3 + 0.25 * 4 + std::pow(0.5, 5) * 9, 1e-12);
  EXPECT_FALSE(serving::make_scheduling_policy("defrag", -1, 0.8).ok());
  EXPECT_FALSE(serving::make_scheduling_policy("defrag", 3, 1.5).ok());
}

TEST(Defrag, FactoryKnowsTheNewPolicies) {
  for (const char* name : {"flfs", "defrag"}) {
    auto p = serving::make_scheduling_policy(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_STREQ((*p)->name(), name);
  }
}

}  // namespace
}  // namespace muflow::engine

namespace muflow::engine {
namespace {

serving::StageStatus held_test_stage(int32_t block, int64_t queued, double since) {
  serving::StageStatus s;
  s.layer = {dataflow::StageKind::kExpert, block, 0};
  s.queued_tokens = queued;
  s.ready_since_s = since;
  return s;
}

TEST(BatchHold, HoldsSmallFragmentsUntilTheirDeadline) {
  std::vector<serving::StageStatus> stages = {
      held_test_stage(0, 10, 1.000), held_test_stage(1, 80, 1.000), held_test_stage(2, 3, 1.0015),
      held_test_stage(3, 0, 0.0)};
  // min 64 tokens, 2 ms: stages 0 and 2 are held; the earliest release is stage 0's at 1.002.
  const double release = serving::apply_batch_hold(stages, 1.001, 64, 0.002);
  EXPECT_DOUBLE_EQ(release, 1.002);
  EXPECT_TRUE(stages[0].held);
  EXPECT_FALSE(stages[1].held);
  EXPECT_TRUE(stages[2].held);
  EXPECT_FALSE(stages[3].held) << "an empty stage is not held, just not runnable";
  // Every policy skips held stages even when they would win: FLFS would pick block 0.
  for (const std::string& name : serving::scheduling_policy_names()) {
    auto policy = serving::make_scheduling_policy(name);
    ASSERT_TRUE(policy.ok());
    EXPECT_EQ((*policy)->pick(stages), 1) << name;
  }
  // At the deadline stage 0 is released; stage 2 (ready later) still waits.
  EXPECT_DOUBLE_EQ(serving::apply_batch_hold(stages, 1.002, 64, 0.002), 1.0035);
  EXPECT_FALSE(stages[0].held);
  EXPECT_TRUE(stages[2].held);
}

TEST(BatchHold, OffByDefaultAndNothingRunnableWhenAllHeld) {
  std::vector<serving::StageStatus> stages = {held_test_stage(0, 1, 5.0)};
  EXPECT_TRUE(std::isinf(serving::apply_batch_hold(stages, 5.0, 0, 0.002)));
  EXPECT_FALSE(stages[0].held);
  EXPECT_EQ(serving::apply_batch_hold(stages, 5.0, 2, 0.002), 5.002);
  for (const std::string& name : serving::scheduling_policy_names()) {
    auto policy = serving::make_scheduling_policy(name);
    ASSERT_TRUE(policy.ok());
    EXPECT_EQ((*policy)->pick(stages), -1) << name;
  }
}

}  // namespace
}  // namespace muflow::engine
