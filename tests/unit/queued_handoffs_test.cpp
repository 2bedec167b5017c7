// actors/queued_handoffs.hpp: which of a barrier-free device's consecutive runs were hand-offs
// to a stage that already had tokens queued (calibration's host_grant for async, #19 item 3).
#include "actors/queued_handoffs.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace muflow::actors {
namespace {

TEST(QueuedHandoffs, OnlyGapsToAStageThatHadTokensQueuedBeforeThePreviousRunEnded) {
  // Out of order on purpose (sorted by start inside); µs.
  std::vector<DeviceRun> runs = {
      {300, 400, 0, -1, "expert b0 e2"},  // after e1: its tokens came at 350, during e1: no
      {100, 200, 0, -1, "expert b0 e0"},
      {250, 300, 0, -1, "expert b0 e1"},  // after e0: queued since 150: a 50 µs hand-off
      {460, 500, 0, -1, "expert b0 e3"},  // after e2: its tokens came at 400, e2's end: no
      {520, 600, 0, -1, "expert b0 e4"},  // after e3: queued at 450, emptied at 480: no
      {630, 700, 0, -1, "expert b0 e5"},  // after e4: queued since 590: a 30 µs hand-off
      {720, 800, 0, -1, "expert b0 e6"},  // after e5: no counters for this stage: no
      {790, 850, 0, -1, "expert b0 e7"},  // after e6, queued, but starts before e6 ends: no
      {900, 950, 1, 4, "expert b1 e0"},   // after e7, queued, but a barrier wiring's run: no
  };
  QueueDepths depths;
  depths["expert b0 e1"] = {{150, 3}};
  depths["expert b0 e2"] = {{350, 2}};
  depths["expert b0 e3"] = {{400, 1}};
  depths["expert b0 e4"] = {{450, 4}, {480, 0}};
  depths["expert b0 e5"] = {{10, 0}, {590, 2}};
  depths["expert b1 e0"] = {{700, 5}};
  depths["expert b0 e7"] = {{700, 5}};
  std::vector<double> gaps = {7.0};  // appended to, not replaced
  add_queued_handoffs(runs, depths, gaps);
  ASSERT_EQ(gaps.size(), 3u);
  EXPECT_DOUBLE_EQ(gaps[0], 7.0);
  EXPECT_DOUBLE_EQ(gaps[1], 50.0);                 // e0 → e1
  EXPECT_DOUBLE_EQ(gaps[2], 30.0);                 // e4 → e5
  EXPECT_DOUBLE_EQ(runs.front().start_us, 100.0);  // sorted by start
}

TEST(QueuedHandoffs, NoRunsOrOneRunGiveNone) {
  std::vector<DeviceRun> none;
  std::vector<double> gaps;
  add_queued_handoffs(none, QueueDepths{}, gaps);
  std::vector<DeviceRun> one = {{0, 10, 0, -1, "attn b0 r0"}};
  add_queued_handoffs(one, QueueDepths{{"attn b0 r0", {{0, 1}}}}, gaps);
  EXPECT_TRUE(gaps.empty());
}

}  // namespace
}  // namespace muflow::actors
