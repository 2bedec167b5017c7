// Serving metrics: percentiles, TTFT / ITL, busy time and MoE balance against values
// computed by hand.

#include "engine/serving/metrics.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace muflow::engine {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(Percentile, LinearInterpolationBetweenClosestRanks) {
  EXPECT_DOUBLE_EQ(serving::percentile_linear({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(serving::percentile_linear({4, 1, 3, 2}, 99), 3.97);  // h = 2.97
  EXPECT_DOUBLE_EQ(serving::percentile_linear({4, 1, 3, 2}, 0), 1.0);
  EXPECT_DOUBLE_EQ(serving::percentile_linear({4, 1, 3, 2}, 100), 4.0);
  EXPECT_DOUBLE_EQ(serving::percentile_linear({10, 20, 30, 40, 50}, 50), 30.0);
  EXPECT_DOUBLE_EQ(serving::percentile_linear({10, 20, 30, 40, 50}, 90), 46.0);  // h = 3.6
  EXPECT_DOUBLE_EQ(serving::percentile_linear({7}, 99), 7.0);
  EXPECT_DOUBLE_EQ(serving::percentile_linear({}, 50), 0.0);
}

// Two requests on two devices:
//   r0 arrives 0.0, tokens 0.1 0.3 0.6, finishes 0.6
//   r1 arrives 0.2, tokens 0.5 0.55, still running
serving::MetricsRecorder example_run() {
  serving::MetricsRecorder rec(2);
  rec.on_arrival(0, 0.0);
  rec.on_arrival(1, 0.2);
  rec.on_token(0, 0.1);
  rec.on_token(0, 0.3);
  rec.on_token(1, 0.5);
  rec.on_token(1, 0.55);
  rec.on_token(0, 0.6);
  rec.on_finish(0, 0.6);
  rec.on_device_busy(0, 0.0, 0.5);
  rec.on_device_busy(0, 0.25, 0.75);  // overlaps: the union is 0.75 s
  rec.on_device_busy(1, 0.1, 0.2);
  rec.on_layer_iteration(0, 0, {4, 4});  // balance 1
  rec.on_expert_tokens(0, 1, 0, 5);
  rec.on_expert_tokens(0, 1, 1, 2);
  rec.on_expert_tokens(0, 1, 0, 1);      // (6, 2): mean 4 / max 6
  rec.on_layer_iteration(1, 0, {0, 0});  // no tokens: not a sample
  return rec;
}

TEST(Metrics, HandComputedSummary) {
  const serving::RunMetrics m = example_run().summarize(1.0);
  EXPECT_EQ(m.num_requests, 2);
  EXPECT_EQ(m.num_completed_requests, 1);
  EXPECT_EQ(m.num_output_tokens, 5);
  EXPECT_DOUBLE_EQ(m.duration_s, 1.0);
  EXPECT_DOUBLE_EQ(m.output_tokens_per_s, 5.0);
  // TTFT samples 100 ms, 300 ms.
  EXPECT_EQ(m.ttft.num_samples, 2);
  EXPECT_NEAR(m.ttft.mean_ms, 200.0, 1e-9);
  EXPECT_NEAR(m.ttft.p50_ms, 200.0, 1e-9);
  EXPECT_NEAR(m.ttft.p99_ms, 298.0, 1e-9);
  // ITL samples 200, 300 (r0) and 50 ms (r1): sorted 50 200 300.
  EXPECT_EQ(m.itl.num_samples, 3);
  EXPECT_NEAR(m.itl.mean_ms, 550.0 / 3.0, 1e-9);
  EXPECT_NEAR(m.itl.p50_ms, 200.0, 1e-9);
  EXPECT_NEAR(m.itl.p99_ms, 298.0, 1e-9);  // h = 1.98: 200 + 0.98 * 100
  ASSERT_EQ(m.device_busy_pct.size(), 2u);
  EXPECT_NEAR(m.device_busy_pct[0], 75.0, 1e-9);
  EXPECT_NEAR(m.device_busy_pct[1], 10.0, 1e-9);
  EXPECT_EQ(m.num_moe_samples, 2);
  EXPECT_NEAR(m.moe_balance, (1.0 + 4.0 / 6.0) / 2.0, 1e-12);
}

// Busy intervals are merged as they arrive when one starts inside the previous one. Whatever
// the arrival order, the busy time is the union's, bitwise: the pieces [0, 0.3], [0.45, 0.7]
// and [0.9, 1.0], summed in time order (as union_length sums them), forward and reversed.
TEST(Metrics, BusyTimeIsTheUnionWhateverTheArrivalOrder) {
  const std::vector<std::pair<double, double>> intervals = {
      {0.0, 0.1}, {0.1, 0.3},    // back to back: one piece [0, 0.3]
      {0.2, 0.25},               // inside it
      {0.5, 0.6}, {0.45, 0.55},  // a later one that starts earlier: [0.45, 0.6]
      {0.58, 0.7},               // overlaps the piece's end: [0.45, 0.7]
      {0.9, 1.0}};               // alone
  serving::MetricsRecorder forward(1), backward(1);
  for (const auto& [b, e] : intervals) forward.on_device_busy(0, b, e);
  for (auto it = intervals.rbegin(); it != intervals.rend(); ++it) {
    backward.on_device_busy(0, it->first, it->second);
  }
  const serving::RunMetrics f = forward.summarize(1.0), r = backward.summarize(1.0);
  ASSERT_EQ(f.device_busy_pct.size(), 1u);
  ASSERT_EQ(r.device_busy_pct.size(), 1u);
  const double union_s = ((0.3 - 0.0) + (0.7 - 0.45)) + (1.0 - 0.9);
  EXPECT_EQ(f.device_busy_pct[0], 100.0 * union_s / 1.0);
  EXPECT_EQ(r.device_busy_pct[0], 100.0 * union_s / 1.0);
}

TEST(Metrics, DurationFallsBackToTheRecordedSpan) {
  const serving::RunMetrics m = example_run().summarize(0.0);
  EXPECT_DOUBLE_EQ(m.duration_s, 0.75);  // first arrival 0.0, last busy end 0.75
  EXPECT_NEAR(m.device_busy_pct[0], 100.0, 1e-9);
}

TEST(Metrics, NothingMeasured) {
  serving::MetricsRecorder rec(3);
  const serving::RunMetrics m = rec.summarize(0.0);
  EXPECT_EQ(m.num_requests, 0);
  EXPECT_EQ(m.ttft.num_samples, 0);
  EXPECT_EQ(m.num_moe_samples, 0);
  EXPECT_EQ(m.device_busy_pct, std::vector<double>(3, 0.0));
  const nlohmann::json j = serving::to_json(m);
  EXPECT_TRUE(j["ttft"].is_null());
  EXPECT_TRUE(j["moe_balance"].is_null());
  EXPECT_THAT(serving::format_metrics_table(m, {}), HasSubstr("busy dev2"));
}

// Arrivals at 0, 1, 2, 3, 4 s: the load window is [2, 4) s (2 s). Arrivals inside: 2, 3
// (1.0/s; the last arrival only closes the window). Request 0 finishes at 2.5 (inside),
// request 1 at 4.0 and request 2 at 4.5 (after), requests 3 and 4 never: 0.5/s. Tokens at
// 1.9 (before), 2.0, 3.0, 3.5 (inside), 4.0 and 4.5 (after): 3 tokens, 1.5/s.
TEST(Metrics, LoadWindowIsTheSecondHalfOfTheArrivals) {
  serving::MetricsRecorder rec(1);
  for (int64_t id = 0; id < 5; ++id) rec.on_arrival(id, static_cast<double>(id));
  rec.on_token(0, 1.9);
  rec.on_token(0, 2.0);
  rec.on_finish(0, 2.5);
  rec.on_token(1, 3.0);
  rec.on_token(1, 4.0);
  rec.on_finish(1, 4.0);
  rec.on_token(2, 3.5);
  rec.on_token(2, 4.5);
  rec.on_finish(2, 4.5);
  const serving::RunMetrics m = rec.summarize(5.0);
  EXPECT_DOUBLE_EQ(m.load_window_s, 2.0);
  EXPECT_DOUBLE_EQ(m.load_arrivals_per_s, 1.0);
  EXPECT_DOUBLE_EQ(m.load_completions_per_s, 0.5);
  EXPECT_DOUBLE_EQ(m.load_output_tokens_per_s, 1.5);
  EXPECT_DOUBLE_EQ(m.output_tokens_per_s, 6.0 / 5.0);  // the whole run, drain included
  EXPECT_THAT(serving::format_metrics_table(m, {}),
              HasSubstr("1.50 tokens/s; requests in 1.0/s, done 0.5/s  (second half of the "
                        "arrivals, 2.000 s)"));
  const nlohmann::json j = serving::to_json(m);
  EXPECT_DOUBLE_EQ(j["load_completions_per_s"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["load_output_tokens_per_s"].get<double>(), 1.5);
}

TEST(Metrics, NoLoadWindowWithoutAnArrivalSpan) {
  serving::MetricsRecorder one(1);
  one.on_arrival(0, 1.0);
  one.on_token(0, 1.5);
  EXPECT_EQ(one.summarize(2.0).load_window_s, 0.0);
  serving::MetricsRecorder same_time(1);
  same_time.on_arrival(0, 1.0);
  same_time.on_arrival(1, 1.0);
  same_time.on_token(1, 1.0);
  const serving::RunMetrics m = same_time.summarize(2.0);
  EXPECT_EQ(m.load_window_s, 0.0);
  EXPECT_EQ(m.load_output_tokens_per_s, 0.0);
  EXPECT_THAT(serving::format_metrics_table(m, {}), Not(HasSubstr("under load")));
  // A closed batch at a huge rate: arrivals 1 ns apart in a 2 s run. Its "window" of
  // nanoseconds gave 1e9 arrivals per second and no token; now none is reported.
  serving::MetricsRecorder burst(1);
  for (int64_t id = 0; id < 4; ++id) burst.on_arrival(id, 1.0 + 1e-9 * static_cast<double>(id));
  burst.on_token(0, 1.5);
  burst.on_finish(0, 2.5);
  const serving::RunMetrics b = burst.summarize(2.0);
  EXPECT_EQ(b.load_window_s, 0.0);
  EXPECT_EQ(b.load_arrivals_per_s, 0.0);
  // Arrivals that span 1.5 % of the run (0.03 s of 2 s) have a load window again.
  serving::MetricsRecorder spread(1);
  for (int64_t id = 0; id < 4; ++id) spread.on_arrival(id, 1.0 + 0.01 * static_cast<double>(id));
  EXPECT_NEAR(spread.summarize(2.0).load_window_s, 0.015, 1e-12);
}

TEST(Metrics, TableAndJson) {
  const serving::RunMetrics m = example_run().summarize(1.0);
  const std::string table = serving::format_metrics_table(m, {"cpu0", "cpu1"});
  EXPECT_THAT(table, HasSubstr("requests completed       1 / 2"));
  EXPECT_THAT(table, HasSubstr("5.00 tokens/s"));
  EXPECT_THAT(table, HasSubstr("mean 200.00  p50 200.00  p99 298.00 ms  (n=2)"));
  EXPECT_THAT(table, HasSubstr("busy cpu0                75.0 %"));
  EXPECT_THAT(table, HasSubstr("0.833"));
  const nlohmann::json j = serving::to_json(m);
  EXPECT_EQ(j["num_output_tokens"], 5);
  EXPECT_EQ(j["num_completed_requests"], 1);
  EXPECT_NEAR(j["ttft"]["p99_ms"].get<double>(), 298.0, 1e-9);
  EXPECT_EQ(j["itl"]["num_samples"], 3);
  EXPECT_NEAR(j["device_busy_pct"][1].get<double>(), 10.0, 1e-9);
  EXPECT_NEAR(j["moe_balance"].get<double>(), 5.0 / 6.0, 1e-12);
}

}  // namespace
}  // namespace muflow::engine

namespace muflow::engine {
namespace {

TEST(MetricsLayers, LayerTimeAndIdleAtTheCombineBarrier) {
  serving::MetricsRecorder m(3);
  // Layer (0, 0): 10 ms; devices finish at 4, 10 and (no expert stage) never.
  m.on_layer_start(0, 0, 1.000);
  m.on_layer_end(0, 0, 1.010, {1.004, 1.010, -1.0});
  // Layer (1, 0): 20 ms; both devices finish together.
  m.on_layer_start(1, 0, 2.000);
  m.on_layer_end(1, 0, 2.020, {2.015, 2.015, -1.0});
  m.on_layer_end(5, 5, 3.0, {2.9, 2.9, 2.9});  // no start: ignored
  m.on_rebalance(7);
  m.on_expert_fetches(2, 1, 0.5);
  m.on_expert_fetches(1, 0, 0.25);
  const serving::RunMetrics r = m.summarize(1.0);
  EXPECT_EQ(r.moe_layer.num_samples, 2);
  EXPECT_NEAR(r.moe_layer.mean_ms, 15.0, 1e-9);
  // Idle fractions: (6/10, 0) for layer 0 and (0, 0) for layer 1 → mean 15%.
  EXPECT_NEAR(r.moe_idle_pct, 15.0, 1e-9);
  EXPECT_EQ(r.tokens_rebalanced, 7);
  EXPECT_EQ(r.expert_fetches, 3);
  EXPECT_EQ(r.expert_restores, 1);
  EXPECT_DOUBLE_EQ(r.fetch_stall_s, 0.75);
  const nlohmann::json j = serving::to_json(r);
  EXPECT_NEAR(j["moe_idle_pct"].get<double>(), 15.0, 1e-9);
  EXPECT_EQ(j["expert_fetches"].get<int64_t>(), 3);
  EXPECT_TRUE(
      serving::to_json(serving::MetricsRecorder(2).summarize(1.0))["moe_idle_pct"].is_null());
}


// Rows through the barrier all-to-alls and how many crossed devices (ExFlow's target).
TEST(MetricsLayers, AllToAllRowsOffDevice) {
  serving::MetricsRecorder m(2);
  m.on_all_to_all_rows(true, 3, 10);
  m.on_all_to_all_rows(false, 1, 10);
  m.on_all_to_all_rows(true, 0, 4);
  const serving::RunMetrics r = m.summarize(1.0);
  EXPECT_EQ(r.dispatch_rows, 14);
  EXPECT_EQ(r.dispatch_remote_rows, 3);
  EXPECT_EQ(r.combine_rows, 10);
  EXPECT_EQ(r.combine_remote_rows, 1);
  EXPECT_NEAR(r.remote_rows_pct(), 100.0 * 4 / 24, 1e-12);
  EXPECT_EQ(serving::to_json(r)["combine_remote_rows"].get<int64_t>(), 1);
  EXPECT_NE(serving::format_metrics_table(r, {}).find(
                "dispatch 3 / 14 (21.4 %), combine 1 / 10 (10.0 %)"),
            std::string::npos)
      << serving::format_metrics_table(r, {});
  EXPECT_DOUBLE_EQ(serving::MetricsRecorder(2).summarize(1.0).remote_rows_pct(), 0.0);
}

// A long-lived engine's recorder compacts as requests finish: the summary keeps every count,
// total, mean, busy % and per-block expert token count it would have had, and its samples
// stay bounded.
TEST(MetricsCompaction, SummaryMatchesTheUncompactedRecorderAndStaysBounded) {
  constexpr int64_t kCapacity = 50;
  serving::MetricsRecorder plain(2), compacting(2, kCapacity);
  auto both = [&](auto&& event) {
    event(plain);
    event(compacting);
  };
  double t = 0.0;
  for (int64_t id = 0; id < 400; ++id) {
    t += 0.01;
    both([&](serving::MetricsRecorder& m) { m.on_arrival(id, t); });
    const int tokens = 1 + static_cast<int>(id % 4);
    for (int k = 0; k < tokens; ++k) {
      const double tk = t + 0.002 * (k + 1) + 0.0001 * static_cast<double>(id % 7);
      both([&](serving::MetricsRecorder& m) { m.on_token(id, tk); });
    }
    const int64_t device = id % 2;
    both([&](serving::MetricsRecorder& m) {
      m.on_device_busy(device, t, t + 0.004);
      m.on_layer_iteration(id % 3, id, {id % 5, 2});
    });
    if (id % 10 == 3) {
      both([&](serving::MetricsRecorder& m) { m.on_cancel(id); });
    } else {
      both([&](serving::MetricsRecorder& m) { m.on_finish(id, t + 0.01); });
    }
    if (id % 37 == 0) compacting.compact();
  }
  compacting.compact();
  const serving::RunMetrics a = plain.summarize(5.0), b = compacting.summarize(5.0);
  EXPECT_EQ(b.num_requests, a.num_requests);
  EXPECT_EQ(b.num_completed_requests, a.num_completed_requests);
  EXPECT_EQ(b.num_output_tokens, a.num_output_tokens);
  EXPECT_EQ(b.ttft.num_samples, a.ttft.num_samples);
  EXPECT_EQ(b.itl.num_samples, a.itl.num_samples);
  EXPECT_NEAR(b.ttft.mean_ms, a.ttft.mean_ms, 1e-9);
  EXPECT_NEAR(b.itl.mean_ms, a.itl.mean_ms, 1e-9);
  ASSERT_EQ(b.device_busy_pct.size(), 2u);
  EXPECT_NEAR(b.device_busy_pct[0], a.device_busy_pct[0], 1e-9);
  EXPECT_NEAR(b.device_busy_pct[1], a.device_busy_pct[1], 1e-9);
  EXPECT_EQ(b.num_moe_samples, a.num_moe_samples);
  EXPECT_NEAR(b.moe_balance, a.moe_balance, 1e-12);
  EXPECT_EQ(compacting.moe_tokens_by_block(), plain.moe_tokens_by_block());
  // Percentiles: of a uniform sample of kCapacity values, within the range of the values.
  EXPECT_GE(b.itl.p50_ms, 1.0);
  EXPECT_LE(b.itl.p99_ms, 3.0);
  EXPECT_GT(a.load_window_s, 0.0);  // needs every request's times: only without compaction
  EXPECT_EQ(b.load_window_s, 0.0);
}

TEST(MetricsCompaction, LatencySamplesKeepEverythingUpToCapacityThenAUniformSample) {
  serving::LatencySamples s(100);
  for (int i = 0; i < 100; ++i) s.add(i);
  EXPECT_EQ(s.samples().size(), 100u);
  EXPECT_EQ(s.samples()[42], 42.0);  // below capacity: every value, in order
  for (int i = 100; i < 100000; ++i) s.add(i);
  EXPECT_EQ(s.samples().size(), 100u);
  EXPECT_EQ(s.count(), 100000);
  EXPECT_DOUBLE_EQ(s.sum(), 99999.0 * 100000.0 / 2.0);
  // A uniform sample of 0..99999: its median is near 50000 (sd of the sample median ≈ 5000).
  const double median = serving::percentile_linear(s.samples(), 50);
  EXPECT_GT(median, 30000.0);
  EXPECT_LT(median, 70000.0);
}

}  // namespace
}  // namespace muflow::engine
