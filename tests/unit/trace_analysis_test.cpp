// Trace analysis: busy/wait/idle on hand-built traces, overview buckets and gaps, the expert
// heatmap and balance, queue downsampling, wait reasons, malformed input, the report model's
// keys, a 1-million-event trace, and the round trip TraceRecorder + MetricsRecorder ->
// analysis busy % == metrics busy %.

#include "engine/trace/trace_analysis.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "engine/serving/metrics.hpp"
#include "engine/trace/trace.hpp"
#include "scratch_path.hpp"

namespace muflow::engine {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

json stage(const std::string& name, int64_t pid, int64_t tid, double ts, double dur,
           int64_t tokens = 0) {
  return {{"name", name}, {"ph", "X"}, {"pid", pid}, {"tid", tid}, {"ts", ts}, {"dur", dur},
          {"args", {{"tokens", tokens}}}};
}

json wait(const std::string& name, int64_t pid, double ts, double dur) {
  return {{"name", name}, {"cat", "wait"}, {"ph", "X"}, {"pid", pid}, {"tid", 10000},
          {"ts", ts}, {"dur", dur}};
}

json meta_name(const char* kind, int64_t pid, int64_t tid, const std::string& name) {
  return {{"name", kind}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

json trace_of(json events, json other = json::object()) {
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", other}};
}

trace::TraceReport analyze_ok(const json& trace, trace::AnalysisOptions options = {}) {
  absl::StatusOr<trace::TraceReport> r = trace::analyze_trace(trace, options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : trace::TraceReport{};
}

// Device 0: stages [0,10] and [20,30]; waits [5,25] and [40,50]; an instant at 60.
// busy 20, wait ([5,25] u [40,50]) \ busy = [10,20] + [40,50] = 20, idle 20, window [0,60].
// Device 1: one stage [10,40]: busy 30, idle 30. Everything is shifted by 1000 µs.
json two_device_trace() {
  const double s = 1000.0;
  return trace_of(json::array({
      meta_name("process_name", 0, 0, "cpu0 (cpu, node0)"),
      meta_name("process_name", 1, 0, "cpu1 (cpu, node0)"),
      meta_name("thread_name", 0, 1, "attn b0 r0"),
      meta_name("thread_name", 0, 10000, "collective waits"),
      meta_name("thread_name", 1, 1, "expert b0 e1"),
      stage("attn b0 r0", 0, 1, s + 0, 10, 4),
      wait("wait dispatch b0", 0, s + 5, 20),
      stage("expert b0 e1", 1, 1, s + 10, 30, 3),
      stage("attn b0 r0", 0, 1, s + 20, 10, 4),
      wait("wait combine b0", 0, s + 40, 10),
      {{"name", "finish"}, {"ph", "i"}, {"s", "g"}, {"pid", 0}, {"tid", 0}, {"ts", s + 60}},
  }), {{"wiring", "asyncmoe"}, {"topology", "demo"}, {"num_events", 6}});
}

TEST(TraceAnalysis, BusyWaitIdleWithOverlapsAndGaps) {
  trace::AnalysisOptions options;
  options.num_buckets = 6;
  const trace::TraceReport r = analyze_ok(two_device_trace(), options);
  EXPECT_DOUBLE_EQ(r.meta.t0_us, 1000.0);
  EXPECT_DOUBLE_EQ(r.meta.duration_us, 60.0);
  EXPECT_EQ(r.meta.wiring, "asyncmoe");
  EXPECT_EQ(r.meta.topology, "demo");
  EXPECT_EQ(r.meta.num_events, 6);
  ASSERT_EQ(r.devices.size(), 2u);

  const trace::DeviceReport& d0 = r.devices[0];
  EXPECT_EQ(d0.name, "cpu0 (cpu, node0)");
  EXPECT_DOUBLE_EQ(d0.busy_us, 20.0);
  EXPECT_DOUBLE_EQ(d0.wait_us, 20.0);
  EXPECT_DOUBLE_EQ(d0.idle_us, 20.0);
  EXPECT_NEAR(d0.busy_pct, 100.0 / 3, 1e-9);
  EXPECT_NEAR(d0.wait_pct, 100.0 / 3, 1e-9);
  EXPECT_NEAR(d0.idle_pct, 100.0 / 3, 1e-9);
  EXPECT_FALSE(d0.run_busy_pct.has_value());
  EXPECT_DOUBLE_EQ(d0.bucket_us, 10.0);
  EXPECT_THAT(d0.bucket_busy, ::testing::ElementsAre(1, 0, 1, 0, 0, 0));
  EXPECT_THAT(d0.bucket_wait, ::testing::ElementsAre(0, 1, 0, 0, 1, 0));
  ASSERT_EQ(d0.gaps.size(), 2u);  // [30,40] and [50,60], equal: earlier first
  EXPECT_DOUBLE_EQ(d0.gaps[0].ts_us, 30.0);
  EXPECT_DOUBLE_EQ(d0.gaps[0].dur_us, 10.0);
  EXPECT_DOUBLE_EQ(d0.gaps[1].ts_us, 50.0);
  ASSERT_TRUE(d0.slices_included);
  ASSERT_EQ(d0.slices.size(), 2u);
  EXPECT_DOUBLE_EQ(d0.slices[1].ts_us, 20.0);
  EXPECT_EQ(d0.slices[1].tokens, 4);

  const trace::DeviceReport& d1 = r.devices[1];
  EXPECT_DOUBLE_EQ(d1.busy_us, 30.0);
  EXPECT_DOUBLE_EQ(d1.wait_us, 0.0);
  EXPECT_DOUBLE_EQ(d1.idle_pct, 50.0);
  ASSERT_EQ(d1.gaps.size(), 2u);  // [0,10] and [40,60]: longest first
  EXPECT_DOUBLE_EQ(d1.gaps[0].ts_us, 40.0);
  EXPECT_DOUBLE_EQ(d1.gaps[0].dur_us, 20.0);

  // The wait lane is not a stage.
  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_EQ(r.stages[0].name, "attn b0 r0");
  EXPECT_EQ(r.stages[0].kind, trace::TraceStageKind::kAttention);
  EXPECT_EQ(r.stages[0].runs, 2);
  EXPECT_EQ(r.stages[0].tokens, 8);
  EXPECT_DOUBLE_EQ(r.stages[0].busy_us, 20.0);
  EXPECT_EQ(d0.slices[0].stage_id, 0);
  EXPECT_EQ(r.devices[1].slices[0].stage_id, 1);

  ASSERT_EQ(r.waits.size(), 2u);
  EXPECT_EQ(r.waits[0].reason, "wait dispatch b0");
  EXPECT_DOUBLE_EQ(r.waits[0].total_us, 20.0);
  EXPECT_EQ(r.waits[0].count, 1);
  EXPECT_EQ(r.waits[1].reason, "wait combine b0");
}

// Random overlapping busy and wait slices on an integer grid against a cell-by-cell count.
TEST(TraceAnalysis, BusyWaitIdleMatchCellCount) {
  std::mt19937 rng(3);
  for (int round = 0; round < 50; ++round) {
    constexpr int kCells = 300;
    std::vector<int> busy(kCells, 0), waiting(kCells, 0);
    json events = json::array();
    std::uniform_int_distribution<int> start(0, kCells - 40), len(0, 39), count(0, 12);
    for (int n = count(rng), i = 0; i < n; ++i) {
      const int a = start(rng), l = len(rng);
      for (int c = a; c < a + l; ++c) busy[c] = 1;
      events.push_back(stage("attn b0 r0", 0, i % 2, a, l));
    }
    for (int n = count(rng), i = 0; i < n; ++i) {
      const int a = start(rng), l = len(rng);
      for (int c = a; c < a + l; ++c) waiting[c] = 1;
      events.push_back(wait("wait dispatch b0", 0, a, l));
    }
    events.push_back({{"name", "end"}, {"ph", "i"}, {"pid", 0}, {"ts", kCells}});
    events.push_back({{"name", "start"}, {"ph", "i"}, {"pid", 0}, {"ts", 0}});
    int num_busy = 0, num_wait = 0;
    for (int c = 0; c < kCells; ++c) {
      num_busy += busy[c];
      num_wait += waiting[c] && !busy[c];
    }
    trace::AnalysisOptions options;
    options.num_buckets = 7;
    const trace::TraceReport r = analyze_ok(trace_of(events), options);
    ASSERT_EQ(r.devices.size(), 1u);
    const trace::DeviceReport& d = r.devices[0];
    EXPECT_DOUBLE_EQ(d.busy_us, num_busy) << "round " << round;
    EXPECT_DOUBLE_EQ(d.wait_us, num_wait) << "round " << round;
    EXPECT_DOUBLE_EQ(d.idle_us, kCells - num_busy - num_wait) << "round " << round;
    double bucket_busy = 0, bucket_wait = 0, gaps = 0;
    for (double f : d.bucket_busy) bucket_busy += f * d.bucket_us;
    for (double f : d.bucket_wait) bucket_wait += f * d.bucket_us;
    for (const trace::TimeSpan& g : d.gaps) gaps += g.dur_us;
    EXPECT_NEAR(bucket_busy, num_busy, 1e-9);
    EXPECT_NEAR(bucket_wait, num_wait, 1e-9);
    EXPECT_NEAR(gaps, d.idle_us, 1e-9);
  }
}

TEST(TraceAnalysis, EventOrderDoesNotMatterAndStreamingEqualsDocument) {
  const json trace = two_device_trace();
  json shuffled = trace;
  std::mt19937 rng(7);
  std::shuffle(shuffled["traceEvents"].begin(), shuffled["traceEvents"].end(), rng);
  const json a = trace::to_report_json(analyze_ok(trace));
  EXPECT_EQ(a, trace::to_report_json(analyze_ok(shuffled)));
  absl::StatusOr<trace::TraceReport> streamed = trace::analyze_trace_text(trace.dump(), {});
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(a, trace::to_report_json(*streamed));
}

TEST(TraceAnalysis, SlicesOmittedAboveTheLimit) {
  trace::AnalysisOptions options;
  options.max_slices_per_device = 1;
  const json report = trace::to_report_json(analyze_ok(two_device_trace(), options));
  EXPECT_TRUE(report["devices"][0]["slices"].is_null());  // 2 slices
  ASSERT_TRUE(report["devices"][1]["slices"].is_array());
  EXPECT_EQ(report["devices"][1]["slices"][0], json::array({10.0, 30.0, 1, 3}));
}

TEST(TraceAnalysis, HeatmapBalanceAndStageNames) {
  const json trace = trace_of(json::array({
      stage("expert b0 e0", 0, 1, 0, 5, 6),
      stage("expert b0 e0", 0, 1, 10, 5, 2),
      stage("expert b0 e1", 1, 1, 0, 5, 2),
      stage("expert b1 e0", 0, 1, 20, 5, 4),
      stage("expert b1 e1", 1, 1, 20, 5, 4),
      stage("attn b1 r1", 1, 2, 30, 5, 9),
      stage("sampler r0", 1, 3, 40, 5, 1),
      stage("something else", 1, 4, 50, 5),
  }), {{"num_layers", 3}, {"num_experts", 3}, {"num_devices", 3}});
  const trace::TraceReport r = analyze_ok(trace);
  const trace::ExpertHeatmap& h = r.heatmap;
  EXPECT_EQ(h.num_blocks, 3);
  EXPECT_EQ(h.num_experts, 3);
  EXPECT_EQ(h.num_devices, 3);  // device 2 has no event but otherData says 3
  EXPECT_EQ(h.expert_tokens, (std::vector<std::vector<int64_t>>{{8, 2, 0}, {4, 4, 0}, {0, 0, 0}}));
  EXPECT_EQ(h.device_tokens, (std::vector<std::vector<int64_t>>{{8, 2, 0}, {4, 4, 0}, {0, 0, 0}}));
  ASSERT_EQ(r.balance.size(), 2u);  // block 2 has no tokens
  EXPECT_EQ(r.balance[0].block, 0);
  EXPECT_NEAR(r.balance[0].mean_over_max, (10.0 / 3) / 8, 1e-12);
  EXPECT_NEAR(r.balance[1].mean_over_max, (8.0 / 3) / 4, 1e-12);
  ASSERT_EQ(r.devices.size(), 3u);
  EXPECT_EQ(r.devices[2].name, "dev2");
  EXPECT_DOUBLE_EQ(r.devices[2].idle_pct, 100.0);

  ASSERT_EQ(r.stages.size(), 5u);  // stages are threads: (0,1) ran b0 e0 and b1 e0
  const auto find = [&](const std::string& name) {
    for (const trace::StageReport& s : r.stages)
      if (s.name == name) return s;
    ADD_FAILURE() << name;
    return trace::StageReport{};
  };
  EXPECT_EQ(find("expert b0 e1").kind, trace::TraceStageKind::kExpert);
  EXPECT_EQ(find("expert b0 e1").block, 0);
  EXPECT_EQ(find("expert b0 e1").index, 1);
  EXPECT_EQ(find("attn b1 r1").kind, trace::TraceStageKind::kAttention);
  EXPECT_EQ(find("attn b1 r1").block, 1);
  EXPECT_EQ(find("attn b1 r1").index, 1);
  EXPECT_EQ(find("sampler r0").kind, trace::TraceStageKind::kSampler);
  EXPECT_EQ(find("sampler r0").block, -1);
  EXPECT_EQ(find("sampler r0").index, 0);
  EXPECT_EQ(find("something else").kind, trace::TraceStageKind::kOther);
  EXPECT_EQ(r.stages[0].name, "expert b0 e0");  // named by its first slice
  EXPECT_EQ(r.stages[0].runs, 3);
}

TEST(TraceAnalysis, QueueDownsamplingKeepsEachBucketsMax) {
  json events = json::array({meta_name("thread_name", 0, 3, "attn b0 r0")});
  const int kSamples = 10000;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> depth(0, 1000);
  std::vector<double> values;
  for (int i = 0; i < kSamples; ++i) {
    values.push_back(depth(rng));
    events.push_back({{"name", "queue attn b0 r0"}, {"ph", "C"}, {"pid", 0}, {"tid", 0},
                      {"ts", static_cast<double>(i)}, {"args", {{"tokens", values.back()}}}});
  }
  events.push_back({{"name", "queue expert b0 e0"}, {"ph", "C"}, {"pid", 1}, {"ts", 5.0},
                    {"args", {{"tokens", 2}}}});
  events.push_back({{"name", "busy"}, {"ph", "C"}, {"pid", 0}, {"ts", 5.0},
                    {"args", {{"busy", 1}}}});
  trace::AnalysisOptions options;
  options.max_queue_points = 100;
  const trace::TraceReport r = analyze_ok(trace_of(events), options);
  ASSERT_EQ(r.queues.size(), 2u);
  const trace::QueueReport& q = r.queues[0];
  EXPECT_EQ(q.name, "attn b0 r0");
  EXPECT_EQ(q.stage_id, 0);
  EXPECT_DOUBLE_EQ(q.max, *std::max_element(values.begin(), values.end()));
  // Window [0, 9999] in 100 buckets of 99.99 µs: the i-th point is the bucket's maximum.
  ASSERT_EQ(q.series.size(), 100u);
  const double bw = 9999.0 / 100;
  for (size_t b = 0; b < q.series.size(); ++b) {
    double expect = -1;
    for (int i = 0; i < kSamples; ++i) {
      const int64_t bucket = std::min<int64_t>(static_cast<int64_t>(i / bw), 99);
      if (bucket == static_cast<int64_t>(b)) expect = std::max(expect, values[i]);
    }
    EXPECT_DOUBLE_EQ(q.series[b].second, expect) << "bucket " << b;
    EXPECT_DOUBLE_EQ(values[static_cast<size_t>(q.series[b].first)], expect);
  }
  EXPECT_EQ(r.queues[1].stage_id, -1);  // no stage of that name on pid 1
  ASSERT_EQ(r.queues[1].series.size(), 1u);
  EXPECT_DOUBLE_EQ(r.queues[1].series[0].first, 5.0);
  EXPECT_DOUBLE_EQ(r.queues[1].series[0].second, 2.0);
}

TEST(TraceAnalysis, ReportJsonHasExactlyTheModelsKeys) {
  const json j = trace::to_report_json(analyze_ok(two_device_trace()));
  const auto keys = [](const json& o) {
    std::set<std::string> k;
    for (const auto& [key, value] : o.items()) k.insert(key);
    return k;
  };
  using S = std::set<std::string>;
  EXPECT_EQ(keys(j), (S{"meta", "devices", "stages", "queues", "heatmap", "balance", "waits"}));
  EXPECT_EQ(keys(j["meta"]), (S{"source", "wiring", "topology", "t0_us", "duration_us",
                                "num_events", "num_dropped_events", "run_duration_us", "run_metrics"}));
  EXPECT_EQ(keys(j["devices"][0]),
            (S{"pid", "name", "busy_us", "wait_us", "idle_us", "busy_pct", "wait_pct",
               "idle_pct", "slices", "buckets", "gaps", "run_busy_pct"}));
  EXPECT_EQ(keys(j["devices"][0]["buckets"]), (S{"bucket_us", "busy", "wait"}));
  EXPECT_EQ(j["devices"][0]["buckets"]["busy"].size(), 1000u);
  EXPECT_EQ(j["devices"][0]["gaps"][0], json::array({30.0, 10.0}));
  EXPECT_EQ(keys(j["stages"][0]), (S{"id", "pid", "tid", "name", "kind", "block", "index",
                                     "busy_us", "runs", "tokens"}));
  EXPECT_EQ(j["stages"][0]["kind"], "attn");
  EXPECT_EQ(keys(j["heatmap"]),
            (S{"num_blocks", "num_experts", "expert_tokens", "num_devices", "device_tokens"}));
  EXPECT_EQ(keys(j["waits"][0]), (S{"reason", "total_us", "count"}));
  const json q = trace::to_report_json(analyze_ok(trace_of(json::array(
      {{{"name", "queue x"}, {"ph", "C"}, {"pid", 0}, {"ts", 1}, {"args", {{"tokens", 3}}}},
       stage("expert b0 e0", 0, 1, 0, 2, 5)}))));
  EXPECT_EQ(keys(q["queues"][0]), (S{"stage_id", "name", "max", "series"}));
  EXPECT_EQ(q["queues"][0]["series"], json::array({json::array({1.0, 3.0})}));
  EXPECT_EQ(keys(q["balance"][0]), (S{"block", "mean_over_max"}));
}

TEST(TraceAnalysis, SummaryText) {
  const std::string text = trace::format_trace_summary(analyze_ok(two_device_trace()), 1);
  EXPECT_THAT(text, HasSubstr("cpu0 (cpu, node0)"));
  EXPECT_THAT(text, HasSubstr("33.3%"));
  EXPECT_THAT(text, HasSubstr("wait dispatch b0"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("wait combine b0")));  // top 1
  EXPECT_THAT(text, HasSubstr("... 1 more"));
  EXPECT_THAT(text, HasSubstr("busiest stages"));
}

absl::Status error_of(const json& trace) {
  trace::AnalysisOptions options;
  options.source = "t.json";
  return trace::analyze_trace(trace, options).status();
}

TEST(TraceAnalysis, BadInputNamesFileAndEvent) {
  EXPECT_THAT(std::string(error_of(json::array()).message()),
              StartsWith("t.json: no 'traceEvents' array"));
  EXPECT_THAT(std::string(error_of({{"traceEvents", 3}}).message()),
              HasSubstr("no 'traceEvents' array"));
  const json ok = stage("a", 0, 0, 0, 1);
  const auto without = [&](const char* key) {
    json e = ok;
    e.erase(key);
    return trace_of(json::array({ok, e}));
  };
  EXPECT_EQ(error_of(without("ph")).message(), "t.json: event 1: missing string field 'ph'");
  EXPECT_EQ(error_of(without("ts")).message(), "t.json: event 1: missing field 'ts'");
  EXPECT_EQ(error_of(without("pid")).message(), "t.json: event 1: missing field 'pid'");
  EXPECT_THAT(std::string(error_of(without("dur")).message()),
              HasSubstr("event 1: complete event ('X') without a numeric 'dur'"));
  EXPECT_EQ(error_of(trace_of(json::array({ok, 5}))).message(), "t.json: event 1: not a JSON object");
  json bad_pid = ok;
  bad_pid["pid"] = "zero";
  EXPECT_EQ(error_of(trace_of(json::array({bad_pid}))).message(),
            "t.json: event 0: 'pid' is not an integer");
  EXPECT_EQ(error_of(trace_of(json::array({bad_pid}))).code(),
            absl::StatusCode::kInvalidArgument);

  trace::AnalysisOptions options;
  options.source = "t.json";
  const absl::Status not_json = trace::analyze_trace_text("{\"traceEvents\": [", options).status();
  EXPECT_EQ(not_json.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(not_json.message()), StartsWith("t.json: not valid JSON: "));
  EXPECT_THAT(std::string(trace::analyze_trace_text("[1, 2]", options).status().message()),
              HasSubstr("no 'traceEvents' array"));
  EXPECT_THAT(
      std::string(trace::analyze_trace_text(R"({"traceEvents": [{"ph":"X","pid":0,"ts":1,"dur":1},
              [1]]})",
                                            options)
                      .status()
                      .message()),
      ::testing::Eq("t.json: event 1: not a JSON object"));
  EXPECT_THAT(std::string(trace::analyze_trace_text(
                              R"({"traceEvents": [{"ph":"X","pid":0,"ts":1}]})", options)
                              .status()
                              .message()),
              StartsWith("t.json: event 0: complete event"));
  const absl::Status missing = trace::analyze_trace_file("/nonexistent/dir/t.json", {}).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.message()), StartsWith("/nonexistent/dir/t.json: cannot read"));
}

TEST(TraceAnalysis, OddInputIsIgnoredNotFatal) {
  const json trace = trace_of(json::array({
      {{"ph", "Z"}, {"pid", 0}, {"ts", 1}},                                 // unknown phase
      {{"ph", "M"}, {"pid", 0}, {"name", "process_name"}, {"args", 3}},     // args not an object
      {{"ph", "M"}, {"pid", 0}, {"name", "thread_name"}},                   // no args
      {{"ph", "X"}, {"pid", 0}, {"ts", 1}, {"dur", 2}},                     // no name, no args
      {{"ph", "C"}, {"pid", 0}, {"ts", 2}, {"name", "queue q"}, {"args", {{"x", "y"}}}},
      {{"ph", "s"}, {"pid", 0}, {"ts", 1}, {"id", 1}},
      stage("expert b999999999999 e0", 0, 2, 0, 1, 3),                      // index too long
      stage("expert bx e1", 0, 2, 0, 1, 3),
  }), {{"num_layers", "many"}, {"num_devices", -4}, {"metrics", 7}});
  const trace::TraceReport r = analyze_ok(trace);
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_DOUBLE_EQ(r.devices[0].busy_us, 3.0);  // [0,1] u [1,3]
  EXPECT_TRUE(r.queues.empty());
  EXPECT_EQ(r.heatmap.num_blocks, 0);
  EXPECT_TRUE(r.balance.empty());
  EXPECT_EQ(analyze_ok(trace_of(json::array())).devices.size(), 0u);
  const std::string empty = trace::format_trace_summary(analyze_ok(trace_of(json::array())), 5);
  EXPECT_THAT(empty, HasSubstr("none recorded"));
}

// 4 devices x 200,000 stage slices of 10 µs every 20 µs, 25,000 waits of 5 µs inside the
// stage gaps, 25,000 queue counters each: 1,000,000 events.
TEST(TraceAnalysis, MillionEventTrace) {
  constexpr int kDevices = 4, kSlices = 200000, kWaits = 25000, kCounters = 25000;
  std::string text = R"({"traceEvents":[)";
  text.reserve(130u * 1000000u);
  bool first = true;
  const auto sep = [&] {
    if (!first) text += ",\n";
    first = false;
  };
  for (int d = 0; d < kDevices; ++d) {
    for (int k = 0; k < kSlices; ++k) {
      sep();
      absl::StrAppendFormat(&text,
                            R"({"name":"expert b%d e%d","ph":"X","pid":%d,"tid":%d,"ts":%d,)"
                            R"("dur":10,"args":{"tokens":%d,"iteration":%d}})",
                            k % 4, d, d, 1 + k % 4, 20 * k, 1 + d, k);
    }
    for (int k = 0; k < kWaits; ++k) {
      sep();
      absl::StrAppendFormat(&text,
                            R"({"name":"wait dispatch b%d","cat":"wait","ph":"X","pid":%d,)"
                            R"("tid":10000,"ts":%d,"dur":5})",
                            k % 4, d, 160 * k + 12);
    }
    for (int k = 0; k < kCounters; ++k) {
      sep();
      absl::StrAppendFormat(&text,
                            R"({"name":"queue expert b0 e%d","ph":"C","pid":%d,"ts":%d,)"
                            R"("args":{"tokens":%d}})",
                            d, d, 160 * k, k % 1000);
    }
  }
  text += R"(],"otherData":{"num_layers":4,"num_experts":4}})";
  absl::StatusOr<trace::TraceReport> r = trace::analyze_trace_text(text, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->meta.num_events, 1000000);
  const double duration = 20.0 * (kSlices - 1) + 10;
  EXPECT_DOUBLE_EQ(r->meta.duration_us, duration);
  ASSERT_EQ(r->devices.size(), 4u);
  for (const trace::DeviceReport& d : r->devices) {
    EXPECT_DOUBLE_EQ(d.busy_us, 10.0 * kSlices);
    EXPECT_DOUBLE_EQ(d.wait_us, 5.0 * kWaits);
    EXPECT_NEAR(d.busy_pct + d.wait_pct + d.idle_pct, 100.0, 1e-9);
    EXPECT_FALSE(d.slices_included);
    EXPECT_EQ(d.num_slices, kSlices);
    EXPECT_EQ(d.gaps.size(), 200u);
  }
  EXPECT_EQ(r->stages.size(), 16u);
  ASSERT_EQ(r->heatmap.num_blocks, 4);
  for (int b = 0; b < 4; ++b) {
    for (int d = 0; d < kDevices; ++d) {
      EXPECT_EQ(r->heatmap.expert_tokens[b][d], static_cast<int64_t>(kSlices / 4) * (1 + d));
    }
  }
  ASSERT_EQ(r->balance.size(), 4u);
  EXPECT_NEAR(r->balance[0].mean_over_max, 2.5 / 4, 1e-12);
  ASSERT_EQ(r->queues.size(), 4u);
  EXPECT_DOUBLE_EQ(r->queues[0].max, 999.0);
  EXPECT_LE(r->queues[0].series.size(), 2000u);
  ASSERT_EQ(r->waits.size(), 4u);
  EXPECT_EQ(r->waits[0].count, kDevices * kWaits / 4);
}

// The metrics recorder and the trace see the same busy intervals (as stage.cpp records
// them); the analysis' run busy % equals the metrics' busy %, and over the trace window
// (no arrivals before the first slice) so does busy_pct.
TEST(TraceAnalysis, RoundTripMatchesMetricsBusy) {
  const char* env = std::getenv("MUFLOW_TEST_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : 20240607;
  std::printf("round-trip seed %llu (override with MUFLOW_TEST_SEED)\n",
              static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> len(1e-5, 3e-3), gap(0.0, 2e-3);
  constexpr int kDevices = 3;
  trace::TraceRecorder trace;
  serving::MetricsRecorder metrics(kDevices);
  double last_end = 0;
  for (int d = 0; d < kDevices; ++d) {
    trace.set_process_name(d, absl::StrFormat("cpu%d", d));
    double t = 0.0123 + gap(rng);
    for (int k = 0; k < 500; ++k) {
      const double begin_s = t, end_s = t + len(rng);
      trace.complete(absl::StrFormat("expert b%d e%d", k % 2, d), d, k % 3, begin_s * 1e6,
                     (end_s - begin_s) * 1e6, {{"tokens", 1}});
      metrics.on_device_busy(d, begin_s, end_s);
      t = end_s + (k % 7 == 0 ? 0.0 : gap(rng));  // some back-to-back slices
      last_end = std::max(last_end, end_s);
    }
  }
  const fs::path path = muflow::testing::scratch_path("trace_analysis_roundtrip.json");
  for (double wall_s : {last_end + 0.0042, 0.0}) {
    const serving::RunMetrics m = metrics.summarize(wall_s);
    trace.set_other_data("metrics", serving::to_json(m));
    ASSERT_TRUE(trace.write_json(path.string()).ok());
    absl::StatusOr<trace::TraceReport> r = trace::analyze_trace_file(path.string(), {});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->devices.size(), static_cast<size_t>(kDevices));
    EXPECT_NEAR(r->meta.run_duration_us, m.duration_s * 1e6, 1e-9 * m.duration_s * 1e6);
    for (int d = 0; d < kDevices; ++d) {
      const trace::DeviceReport& dev = r->devices[static_cast<size_t>(d)];
      const double expect = m.device_busy_pct[static_cast<size_t>(d)];
      ASSERT_TRUE(dev.run_busy_pct.has_value());
      EXPECT_NEAR(*dev.run_busy_pct, expect, 1e-6 * expect) << "device " << d;
      ASSERT_TRUE(dev.recorded_busy_pct.has_value());
      EXPECT_DOUBLE_EQ(*dev.recorded_busy_pct, expect);
      if (wall_s == 0.0) {  // metrics' duration = first begin .. last end = trace window
        EXPECT_NEAR(dev.busy_pct, expect, 1e-6 * expect) << "device " << d;
      }
    }
  }
  fs::remove(path);
}

}  // namespace
}  // namespace muflow::engine
