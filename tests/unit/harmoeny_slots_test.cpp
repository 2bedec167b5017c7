// HarMoEny's slot cache timeline (engine/planning/harmoeny_slots.hpp): run order, prefetch overlap,
// no-prefetch serialisation, restores and errors.
#include <gtest/gtest.h>

#include "engine/planning/harmoeny_slots.hpp"

namespace muflow::engine {
namespace {

TEST(HarmoenySlots, LocalOnlyRunsByDescendingLoadWithoutCopies) {
  auto t = planning::plan_slot_timeline(
      {{3, 10, true, 1.0}, {1, 30, true, 3.0}, {2, 20, true, 2.0}}, 4, 4, 5.0, true);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->order, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_DOUBLE_EQ(t->makespan_s, 6.0);
  EXPECT_EQ(t->fetches, 0);
  EXPECT_DOUBLE_EQ(t->stall_s, 0.0);
}

TEST(HarmoenySlots, ForeignExpertsRunAfterTheTwoLargestLocalOnes) {
  // Locals 0 (3 s), 1 (2 s), 2 (1 s); foreign 7 (1 s). Copy 1.5 s.
  std::vector<planning::SlotWork> work = {
      {0, 30, true, 3.0}, {1, 20, true, 2.0}, {2, 10, true, 1.0}, {7, 15, false, 1.0}};
  auto pre = planning::plan_slot_timeline(work, 3, 3, 1.5, true);
  ASSERT_TRUE(pre.ok()) << pre.status();
  EXPECT_EQ(pre->order, (std::vector<int32_t>{0, 1, 7, 2}));
  // Slot of expert 0 frees at 3 s; the copy runs 3..4.5 while expert 1 computes (3..5).
  EXPECT_DOUBLE_EQ(pre->start_s[2], 5.0);
  EXPECT_DOUBLE_EQ(pre->makespan_s, 7.0);
  EXPECT_DOUBLE_EQ(pre->stall_s, 0.0);
  EXPECT_EQ(pre->fetches, 1);
  EXPECT_EQ(pre->restores, 1);
  // Expert 7 reuses expert 0's slot (position 0 in the order); locals have no slot.
  EXPECT_EQ(pre->slot, (std::vector<int32_t>{-1, -1, 0, -1}));
  EXPECT_EQ(pre->slot_prev, (std::vector<int32_t>{-1, -1, 0, -1}));
  // Without prefetch the copy starts when the compute stream reaches expert 7 (at 5 s).
  auto serial = planning::plan_slot_timeline(work, 3, 3, 1.5, false);
  ASSERT_TRUE(serial.ok());
  EXPECT_DOUBLE_EQ(serial->start_s[2], 6.5);
  EXPECT_DOUBLE_EQ(serial->makespan_s, 8.5);
  EXPECT_DOUBLE_EQ(serial->stall_s, 1.5);
}

TEST(HarmoenySlots, SpareAndIdleSlotsAreUsedFirstAndCopiesQueueOnOneStream) {
  // A device whose two home experts got no tokens here: both slots are free at 0. Three
  // foreign experts of 1 s each, copies of 2 s: copies at 0..2, 2..4, then the third waits
  // for a slot (free at 3 when the first foreign expert finishes) and the stream (4): 4..6.
  std::vector<planning::SlotWork> work = {
      {5, 9, false, 1.0}, {6, 8, false, 1.0}, {7, 7, false, 1.0}};
  auto t = planning::plan_slot_timeline(work, 2, 2, 2.0, true);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->order, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(t->start_s, (std::vector<double>{2.0, 4.0, 6.0}));
  EXPECT_DOUBLE_EQ(t->makespan_s, 7.0);
  EXPECT_DOUBLE_EQ(t->stall_s, 4.0);
  EXPECT_EQ(t->fetches, 3);
  EXPECT_EQ(t->restores, 2);  // both home slots were overwritten once
  // 5 and 6 take the two free slots; 7 reuses 5's slot after it computed.
  EXPECT_EQ(t->slot, (std::vector<int32_t>{0, 1, 0}));
  EXPECT_EQ(t->slot_prev, (std::vector<int32_t>{-1, -1, 0}));
  // A spare slot (no home expert) is preferred and needs no restore.
  auto spare = planning::plan_slot_timeline({{5, 9, false, 1.0}}, 2, 3, 2.0, true);
  ASSERT_TRUE(spare.ok());
  EXPECT_EQ(spare->restores, 0);
}

TEST(HarmoenySlots, PrefetchNeverSlowerThanSerialCopies) {
  for (int n = 1; n <= 6; ++n) {
    std::vector<planning::SlotWork> work = {{0, 50, true, 2.0}, {1, 40, true, 1.5}};
    for (int f = 0; f < n; ++f) work.push_back({10 + f, 10 + f, false, 0.5 + 0.25 * f});
    auto pre = planning::plan_slot_timeline(work, 2, 2, 0.8, true);
    auto serial = planning::plan_slot_timeline(work, 2, 2, 0.8, false);
    ASSERT_TRUE(pre.ok() && serial.ok());
    EXPECT_LE(pre->makespan_s, serial->makespan_s + 1e-12) << n;
    EXPECT_EQ(pre->fetches, n);
    double compute = 0;
    for (const planning::SlotWork& w : work) compute += w.compute_s;
    EXPECT_NEAR(pre->makespan_s, compute + pre->stall_s, 1e-12);
  }
}

TEST(HarmoenySlots, BadInputIsRejected) {
  EXPECT_FALSE(planning::plan_slot_timeline({}, 3, 2, 1.0, true).ok()) << "slots < home experts";
  EXPECT_FALSE(planning::plan_slot_timeline({{1, 0, true, 1.0}}, 1, 1, 1.0, true).ok())
      << "0 tokens";
  EXPECT_FALSE(
      planning::plan_slot_timeline({{1, 1, true, 1.0}, {1, 2, false, 1.0}}, 1, 1, 1.0, true).ok())
      << "repeated id";
  EXPECT_FALSE(
      planning::plan_slot_timeline({{1, 1, true, 1.0}, {2, 1, true, 1.0}}, 1, 1, 1.0, true).ok())
      << "more locals than home experts";
  EXPECT_FALSE(planning::plan_slot_timeline({{1, 1, false, 1.0}}, 0, 0, 1.0, true).ok())
      << "no slot";
  EXPECT_FALSE(planning::plan_slot_timeline({{1, 1, true, 1.0}}, 1, 1, -1.0, true).ok())
      << "copy < 0";
}

}  // namespace
}  // namespace muflow::engine
