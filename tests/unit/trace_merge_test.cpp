// merge_trace (engine/trace/trace_merge.hpp): every kind of event muflow records comes across
// with its fields and its time shifted; names merge; a trace with an event muflow does not
// record is refused with the event's index and nothing is added; the receiver's cap holds.

#include "engine/trace/trace_merge.hpp"

#include <gtest/gtest.h>

#include <string>

namespace muflow::engine::trace {
namespace {

// The events of `r.to_json()` with phase `ph`.
std::vector<nlohmann::json> events(const TraceRecorder& r, const std::string& ph) {
  std::vector<nlohmann::json> out;
  const nlohmann::json all = r.to_json();
  for (const auto& e : all["traceEvents"]) {
    if (e["ph"] == ph) out.push_back(e);
  }
  return out;
}

TEST(TraceMerge, EveryEventKindComesAcrossShifted) {
  TraceRecorder worker;
  worker.complete("expert b0 e1", 2, 7, 100.0, 30.0, nlohmann::json{{"tokens", 4}});
  worker.complete_in("wait", "wait dispatch b0", 2, 10000, 140.0, 5.0);
  worker.instant("oom", 3, 1, 150.0, InstantScope::kProcess);
  worker.counter("kv cache", 3, 160.0, nlohmann::json{{"bytes", 4096}});
  worker.flow('s', "batch", "dispatch b0", 99, 2, 7, 170.0);
  worker.set_process_name(2, "cpu2");
  worker.set_thread_name(2, 7, "expert b0 e1");

  TraceRecorder driver;
  driver.complete("attention b0", 0, 1, 10.0, 20.0);
  auto added = merge_trace(worker.to_json(), "worker 1", -50.0, driver);
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(*added, 5);
  EXPECT_EQ(driver.num_events(), 6);

  auto x = events(driver, "X");
  ASSERT_EQ(x.size(), 3u);
  // Sorted by time: the driver's own slice, then the worker's two.
  EXPECT_EQ(x[1]["name"], "expert b0 e1");
  EXPECT_DOUBLE_EQ(x[1]["ts"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(x[1]["dur"].get<double>(), 30.0);
  EXPECT_EQ(x[1]["pid"], 2);
  EXPECT_EQ(x[1]["tid"], 7);
  EXPECT_EQ(x[1]["args"]["tokens"], 4);
  EXPECT_EQ(x[2]["cat"], "wait");
  auto i = events(driver, "i");
  ASSERT_EQ(i.size(), 1u);
  EXPECT_EQ(i[0]["s"], "p");
  EXPECT_DOUBLE_EQ(i[0]["ts"].get<double>(), 100.0);
  auto c = events(driver, "C");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]["args"]["bytes"], 4096);
  auto s = events(driver, "s");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]["id"], 99);
  bool process_named = false, thread_named = false;
  for (const auto& m : events(driver, "M")) {
    if (m["name"] == "process_name" && m["pid"] == 2) process_named = m["args"]["name"] == "cpu2";
    if (m["name"] == "thread_name" && m["tid"] == 7) thread_named = true;
  }
  EXPECT_TRUE(process_named);
  EXPECT_TRUE(thread_named);
}

TEST(TraceMerge, AnEventMuflowDoesNotRecordIsRefusedAndNothingIsAdded) {
  TraceRecorder worker;
  worker.complete("expert", 1, 1, 0.0, 1.0);
  nlohmann::json j = worker.to_json();
  j["traceEvents"].push_back({{"name", "b"}, {"ph", "B"}, {"pid", 1}, {"tid", 1}, {"ts", 2.0}});
  TraceRecorder driver;
  auto added = merge_trace(j, "worker 2's trace", 0.0, driver);
  ASSERT_FALSE(added.ok());
  EXPECT_NE(added.status().message().find("worker 2's trace: event 1: phase 'B'"),
            std::string::npos)
      << added.status();
  EXPECT_EQ(driver.num_events(), 0);

  nlohmann::json no_id = worker.to_json();
  no_id["traceEvents"].push_back(
      {{"name", "f"}, {"ph", "f"}, {"pid", 1}, {"tid", 1}, {"ts", 2.0}});
  EXPECT_FALSE(merge_trace(no_id, "w", 0.0, driver).ok());
  EXPECT_FALSE(merge_trace(nlohmann::json::array(), "w", 0.0, driver).ok());
  EXPECT_EQ(driver.num_events(), 0);
}

TEST(TraceMerge, TheReceiversCapHolds) {
  TraceRecorder worker;
  for (int k = 0; k < 5; ++k) worker.complete("s", 1, 1, k, 1.0);
  TraceRecorder driver(/*max_events=*/3);
  auto added = merge_trace(worker.to_json(), "w", 0.0, driver);
  ASSERT_TRUE(added.ok());
  EXPECT_EQ(driver.num_events(), 3);
  EXPECT_EQ(driver.num_dropped(), 2);
}

}  // namespace
}  // namespace muflow::engine::trace
