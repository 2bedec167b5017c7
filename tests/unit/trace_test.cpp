// Chrome trace recorder: JSON structure, deterministic order, the event bound, concurrent
// recording and write errors.

#include "engine/trace/trace.hpp"

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace muflow::engine {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

fs::path scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir =
      fs::temp_directory_path() / (std::string("muflow_trace_test_") + info->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(Trace, WritesChromeTraceEventFormat) {
  trace::TraceRecorder rec;
  rec.set_process_name(1, "cpu1");
  rec.set_process_name(0, "cpu0");
  rec.set_thread_name(0, 7, "expert b0 e3");
  rec.complete("expert b0 e3", 0, 7, 250.0, 40.5, {{"num_tokens", 12}});
  rec.complete("attention b0", 1, 2, 100.0, 80.0);
  rec.instant("request 4 arrived", 0, 0, 10.0, trace::InstantScope::kGlobal, {{"request_id", 4}});
  rec.counter("queue", 1, 120.0, {{"queued_tokens", 3}});
  rec.set_other_data("wiring", "sync");
  const fs::path path = scratch_dir() / "nested" / "dir" / "trace.json";
  ASSERT_TRUE(rec.write_json(path.string()).ok());

  const nlohmann::json j = read_json(path);
  EXPECT_EQ(j["displayTimeUnit"], "ms");
  EXPECT_EQ(j["otherData"]["wiring"], "sync");
  EXPECT_EQ(j["otherData"]["num_dropped_events"], 0);
  EXPECT_EQ(j["otherData"]["num_events"], 4);
  const nlohmann::json& ev = j["traceEvents"];
  ASSERT_EQ(ev.size(), 7u);
  // Metadata first: processes by pid, then threads.
  EXPECT_EQ(ev[0]["ph"], "M");
  EXPECT_EQ(ev[0]["name"], "process_name");
  EXPECT_EQ(ev[0]["pid"], 0);
  EXPECT_EQ(ev[0]["args"]["name"], "cpu0");
  EXPECT_EQ(ev[1]["args"]["name"], "cpu1");
  EXPECT_EQ(ev[2]["name"], "thread_name");
  EXPECT_EQ(ev[2]["tid"], 7);
  EXPECT_EQ(ev[2]["args"]["name"], "expert b0 e3");
  // Then events by timestamp.
  EXPECT_EQ(ev[3]["ph"], "i");
  EXPECT_EQ(ev[3]["s"], "g");
  EXPECT_EQ(ev[3]["ts"], 10.0);
  EXPECT_EQ(ev[3]["args"]["request_id"], 4);
  EXPECT_EQ(ev[4]["name"], "attention b0");
  EXPECT_EQ(ev[4]["ph"], "X");
  EXPECT_EQ(ev[4]["pid"], 1);
  EXPECT_EQ(ev[4]["tid"], 2);
  EXPECT_EQ(ev[4]["dur"], 80.0);
  EXPECT_FALSE(ev[4].contains("args"));
  EXPECT_EQ(ev[5]["ph"], "C");
  EXPECT_EQ(ev[5]["args"]["queued_tokens"], 3);
  EXPECT_EQ(ev[6]["ts"], 250.0);
  EXPECT_EQ(ev[6]["dur"], 40.5);
  EXPECT_EQ(ev[6]["args"]["num_tokens"], 12);
}

TEST(Trace, OrderDoesNotDependOnRecordingOrder) {
  trace::TraceRecorder a, b;
  a.complete("x", 0, 1, 5.0, 1.0, {{"k", 1}});
  a.complete("x", 0, 1, 5.0, 1.0, {{"k", 2}});
  a.complete("y", 1, 0, 5.0, 1.0);
  a.complete("z", 0, 0, 1.0, 1.0);
  b.complete("z", 0, 0, 1.0, 1.0);
  b.complete("y", 1, 0, 5.0, 1.0);
  b.complete("x", 0, 1, 5.0, 1.0, {{"k", 2}});
  b.complete("x", 0, 1, 5.0, 1.0, {{"k", 1}});
  EXPECT_EQ(a.to_json().dump(), b.to_json().dump());
  const nlohmann::json ev = a.to_json()["traceEvents"];
  EXPECT_EQ(ev[0]["name"], "z");
  EXPECT_EQ(ev[1]["args"]["k"], 1);  // ts 5: pid 0 before pid 1
  EXPECT_EQ(ev[3]["name"], "y");
}

TEST(Trace, BoundedEventCountRecordsDrops) {
  trace::TraceRecorder rec(5);
  for (int i = 0; i < 8; ++i) rec.complete("e", 0, 0, i, 1.0);
  rec.set_thread_name(0, 0, "still named");  // metadata is not bounded
  EXPECT_EQ(rec.num_events(), 5);
  EXPECT_EQ(rec.num_dropped(), 3);
  const fs::path path = scratch_dir() / "t.json";
  ASSERT_TRUE(rec.write_json(path.string()).ok());
  const nlohmann::json j = read_json(path);
  EXPECT_EQ(j["traceEvents"].size(), 6u);
  EXPECT_EQ(j["otherData"]["num_dropped_events"], 3);
  EXPECT_EQ(j["otherData"]["max_events"], 5);
  EXPECT_EQ(j["traceEvents"].back()["ts"], 4.0);  // the first five were kept

  trace::TraceRecorder none(0);
  none.instant("i", 0, 0, 0.0);
  EXPECT_EQ(none.num_events(), 0);
  EXPECT_EQ(none.num_dropped(), 1);
}

TEST(Trace, ConcurrentRecordingKeepsCounts) {
  trace::TraceRecorder rec(2500);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&rec, t] {
      for (int i = 0; i < 1000; ++i) rec.complete("stage", t, i % 3, i, 1.0);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(rec.num_events(), 2500);
  EXPECT_EQ(rec.num_dropped(), 1500);
  EXPECT_EQ(rec.to_json()["traceEvents"].size(), 2500u);
}

TEST(Trace, WriteErrorNamesThePath) {
  const fs::path dir = scratch_dir();
  std::ofstream(dir / "a_file") << "x";
  const std::string bad = (dir / "a_file" / "trace.json").string();
  trace::TraceRecorder rec;
  absl::Status s = rec.write_json(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(bad));
  // #15: the reason appears once ("...: Not a directory", never twice).
  const std::string m(s.message());
  const size_t reason = m.rfind(": ");
  ASSERT_NE(reason, std::string::npos);
  EXPECT_EQ(m.find(m.substr(reason)), reason) << m;
}

}  // namespace
}  // namespace muflow::engine
