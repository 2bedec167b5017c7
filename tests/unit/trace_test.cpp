// Chrome trace recorder: JSON structure, deterministic order, the event bound, concurrent
// recording, write errors, and reading the recorded events as the written file reads.

#include "engine/trace/trace.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "engine/trace/trace_reader.hpp"

namespace muflow::engine {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

fs::path trace_scratch_dir() {
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
  const fs::path path = trace_scratch_dir() / "nested" / "dir" / "trace.json";
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
  const fs::path path = trace_scratch_dir() / "t.json";
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
  const fs::path dir = trace_scratch_dir();
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

// Every field of a view, times in hexadecimal floating point (exact).
std::string describe(const trace::TraceEventView& v) {
  char times[96];
  std::snprintf(times, sizeof times, "%a %a", v.ts_us, v.dur_us);
  return std::to_string(v.index) + " " + v.phase + " '" + std::string(v.name) + "' '" +
         std::string(v.cat) + "' " + std::to_string(v.pid) + " " + std::to_string(v.tid) + " " +
         times + " " + (v.args == nullptr ? "-" : v.args->dump());
}

// The views of the file `rec` writes (parsed back) and of `rec` itself, and both otherData.
struct BothReads {
  std::vector<std::string> file, memory;
  nlohmann::json file_other, memory_other;
  absl::Status file_status, memory_status;
};
BothReads read_both(const trace::TraceRecorder& rec, const fs::path& path) {
  BothReads r;
  EXPECT_TRUE(rec.write_json(path.string()).ok());
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto into = [](std::vector<std::string>& lines) {
    return [&lines](const trace::TraceEventView& v) {
      lines.push_back(describe(v));
      return absl::OkStatus();
    };
  };
  r.file_status = trace::stream_trace_events(text, "t.json", into(r.file), &r.file_other);
  r.memory_status = trace::visit_recorded_events(rec, "t.json", into(r.memory), &r.memory_other);
  return r;
}

// visit_recorded_events (what calibrate reads its runs' traces with) gives the views reading
// the written file gives: same order, same strings, bit-equal times, equal args, otherData.
TEST(Trace, RecordedEventsReadAsTheWrittenFileReads) {
  trace::TraceRecorder rec(9);
  rec.set_process_name(1, "cpu1");
  rec.set_process_name(0, "cpu0");
  rec.set_thread_name(0, 7, "expert b0 e3");
  rec.set_other_data("wiring", "sync");
  // Times that print with many digits, a tie broken by args, each phase, a category.
  rec.complete("expert b0 e3", 0, 7, 0.1 + 0.2, 1.0 / 3.0, {{"tokens", 12}, {"block", 0}});
  rec.complete("attn b0 r0", 1, 2, 123456789.123456789, 1e-7, {{"tokens", 3}});
  rec.complete("attn b0 r0", 1, 2, 123456789.123456789, 1e-7, {{"tokens", 2}});
  rec.complete_in("wait", "wait dispatch b0", 0, 10000, 5.0, 0.0);
  rec.instant("start", 0, 0, 0.0, trace::InstantScope::kGlobal);
  rec.counter("queue expert b0 e3", 0, 2.5, {{"tokens", 4}});
  rec.flow('s', "batch", "b0", 42, 0, 7, 1.25);
  rec.flow('f', "batch", "b0", 42, 1, 2, 9.75);
  rec.complete("sampler r0", 1, 3, 7e300, 2.0);
  rec.complete("dropped", 0, 0, 1.0, 1.0);  // past the cap of 9: counted in otherData
  const BothReads r = read_both(rec, trace_scratch_dir() / "t.json");
  ASSERT_TRUE(r.file_status.ok()) << r.file_status;
  ASSERT_TRUE(r.memory_status.ok()) << r.memory_status;
  EXPECT_EQ(r.memory.size(), 12u);  // 3 metadata + 9 kept
  EXPECT_EQ(r.memory, r.file);
  EXPECT_EQ(r.memory_other, r.file_other);
  EXPECT_EQ(r.memory_other["num_dropped_events"], 1);

  // A visitor's error stops the visit and is returned.
  int seen = 0;
  nlohmann::json other;
  const absl::Status stop = trace::visit_recorded_events(
      rec, "t.json",
      [&](const trace::TraceEventView&) {
        return ++seen == 4 ? absl::CancelledError("enough") : absl::OkStatus();
      },
      &other);
  EXPECT_EQ(stop.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(seen, 4);
}

// A time JSON cannot hold (written as null) fails the in-memory read as it fails the file's:
// the same message, naming the same event.
TEST(Trace, RecordedNonFiniteTimeFailsAsTheFileDoes) {
  for (const bool in_dur : {false, true}) {
    SCOPED_TRACE(in_dur ? "dur" : "ts");
    trace::TraceRecorder rec;
    rec.set_process_name(0, "cpu0");
    rec.complete("a", 0, 0, 1.0, 1.0);
    rec.complete("b", 0, 0, in_dur ? 2.0 : std::nan(""), in_dur ? INFINITY : 1.0);
    const BothReads r = read_both(rec, trace_scratch_dir() / "t.json");
    ASSERT_FALSE(r.file_status.ok());
    EXPECT_EQ(r.memory_status, r.file_status);
    EXPECT_THAT(std::string(r.memory_status.message()), HasSubstr("t.json: event 2: "));
  }
}

}  // namespace
}  // namespace muflow::engine
