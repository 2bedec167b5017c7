// The `muflow bench --url` summary on hand-made records: vLLM's TTFT / TPOT / ITL / E2EL and
// throughput definitions, computed by hand.

#include "http/client/bench_metrics.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace muflow::http::client {
namespace {

using ::testing::HasSubstr;

RequestRecord ok_record(int64_t id, double scheduled_s, double start_s,
                        std::vector<double> token_times_s, int64_t prompt_tokens,
                        int64_t usage_completion_tokens) {
  RequestRecord r;
  r.id = id;
  r.scheduled_s = scheduled_s;
  r.num_prompt_tokens = prompt_tokens;
  r.max_tokens = 8;
  r.result.ok = true;
  r.result.http_status = 200;
  r.result.start_s = start_s;
  r.result.token_times_s = std::move(token_times_s);
  r.result.end_s = r.result.token_times_s.back() + 0.01;
  r.result.usage_completion_tokens = usage_completion_tokens;
  return r;
}

RequestRecord failed_record(int64_t id, double start_s, FailureKind kind, int status,
                            const std::string& error) {
  RequestRecord r;
  r.id = id;
  r.num_prompt_tokens = 100;  // failed requests count no tokens
  r.result.start_s = start_s;
  r.result.failure = kind;
  r.result.http_status = status;
  r.result.error = error;
  return r;
}

LoadRun example_run() {
  LoadRun run;
  run.duration_s = 4.0;
  run.max_in_flight = 3;
  // ttft 0.5, e2el 0.8, tpot (0.8 - 0.5) / 2 = 0.15, itl 0.1 and 0.2; waited 0.5 s.
  run.records.push_back(ok_record(0, 0.5, 1.0, {1.5, 1.6, 1.8}, 10, 3));
  // One token and no usage: ttft = e2el = 0.2, no TPOT, no ITL.
  run.records.push_back(ok_record(1, 2.0, 2.0, {2.2}, 5, -1));
  run.records.push_back(
      failed_record(2, 0.1, FailureKind::kHttpStatus, 429, "HTTP 429: slow down"));
  run.records.push_back(failed_record(3, 0.3, FailureKind::kDropped, 200, "closed"));
  run.records.push_back(failed_record(4, 0.1, FailureKind::kHttpStatus, 429, "HTTP 429: again"));
  return run;
}

TEST(BenchMetrics, FollowsVllmDefinitions) {
  const BenchMetrics m = summarize_http_load(example_run());
  EXPECT_EQ(m.num_requests, 5);
  EXPECT_EQ(m.num_successful, 2);
  EXPECT_EQ(m.num_failed, 3);
  EXPECT_EQ(m.max_in_flight, 3);
  EXPECT_EQ(m.total_input_tokens, 15);
  EXPECT_EQ(m.total_output_tokens, 4);  // usage 3 + one token event
  EXPECT_DOUBLE_EQ(m.request_throughput, 0.5);
  EXPECT_DOUBLE_EQ(m.output_token_throughput, 1.0);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 19.0 / 4.0);
  constexpr double kTol = 1e-9;
  EXPECT_EQ(m.ttft.num_samples, 2);
  EXPECT_NEAR(m.ttft.mean_ms, 350.0, kTol);
  EXPECT_NEAR(m.ttft.p50_ms, 350.0, kTol);
  EXPECT_NEAR(m.ttft.p99_ms, 200.0 + 0.99 * 300.0, kTol);
  EXPECT_EQ(m.tpot.num_samples, 1);
  EXPECT_NEAR(m.tpot.mean_ms, 150.0, kTol);
  EXPECT_EQ(m.itl.num_samples, 2);
  EXPECT_NEAR(m.itl.mean_ms, 150.0, kTol);
  EXPECT_NEAR(m.itl.p99_ms, 100.0 + 0.99 * 100.0, kTol);
  EXPECT_EQ(m.e2el.num_samples, 2);
  EXPECT_NEAR(m.e2el.mean_ms, 500.0, kTol);
  EXPECT_NEAR(m.e2el.p99_ms, 200.0 + 0.99 * 600.0, kTol);
  // Waits: 0.5, 0, 0.1, 0.3, 0.1 s over 5 sent requests.
  EXPECT_NEAR(m.mean_queue_ms, 200.0, kTol);
  ASSERT_EQ(m.failures.size(), 2u);
  EXPECT_EQ(m.failures[0].kind, "http_status");
  EXPECT_EQ(m.failures[0].http_status, 429);
  EXPECT_EQ(m.failures[0].count, 2);
  EXPECT_EQ(m.failures[0].example, "HTTP 429: slow down");
  EXPECT_EQ(m.failures[1].kind, "dropped");
  EXPECT_EQ(m.failures[1].count, 1);
}

TEST(BenchMetrics, ReportAndJsonCarryTheNumbers) {
  const BenchMetrics m = summarize_http_load(example_run());
  BenchReportHeader h;
  h.url = "http://127.0.0.1:8000";
  h.model = "kjv";
  h.max_concurrency = 4;
  const std::string text = format_bench_report(m, h);
  EXPECT_THAT(text, HasSubstr("Successful requests:                     2\n"));
  EXPECT_THAT(text, HasSubstr("Failed requests:                         3\n"));
  EXPECT_THAT(text, HasSubstr("Maximum request concurrency:             4\n"));
  EXPECT_THAT(text, HasSubstr("Output token throughput (tok/s):         1.00\n"));
  EXPECT_THAT(text, HasSubstr("Total token throughput (tok/s):          4.75\n"));
  EXPECT_THAT(text, HasSubstr("Mean TTFT (ms):                          350.00\n"));
  EXPECT_THAT(text, HasSubstr("Mean TPOT (ms):                          150.00\n"));
  EXPECT_THAT(text, HasSubstr("P99 E2EL (ms):                           794.00\n"));
  EXPECT_THAT(text, HasSubstr("HTTP 429:"));
  EXPECT_THAT(text, HasSubstr("2  e.g. HTTP 429: slow down"));

  const nlohmann::json j = bench_metrics_json(m);
  EXPECT_EQ(j["successful"], 2);
  EXPECT_EQ(j["failed"], 3);
  EXPECT_DOUBLE_EQ(j["total_token_throughput"].get<double>(), 4.75);
  EXPECT_EQ(j["tpot"]["num_samples"], 1);
  EXPECT_EQ(j["failures"][0]["http_status"], 429);

  const nlohmann::json r = request_record_json(example_run().records[0]);
  EXPECT_EQ(r["id"], 0);
  EXPECT_EQ(r["output_tokens"], 3);
  EXPECT_NEAR(r["ttft_ms"].get<double>(), 500.0, 1e-9);
  ASSERT_EQ(r["itl_ms"].size(), 2u);
  EXPECT_FALSE(r.contains("error"));
  const nlohmann::json f = request_record_json(example_run().records[2]);
  EXPECT_EQ(f["ok"], false);
  EXPECT_EQ(f["failure"], "http_status");
  EXPECT_TRUE(f["ttft_ms"].is_null());
}

TEST(BenchMetrics, EmptyRunIsAllZeros) {
  const BenchMetrics m = summarize_http_load(LoadRun{});
  EXPECT_EQ(m.num_requests, 0);
  EXPECT_EQ(m.request_throughput, 0.0);
  EXPECT_EQ(m.ttft.num_samples, 0);
  EXPECT_TRUE(bench_metrics_json(m)["ttft"].is_null());
}

}  // namespace
}  // namespace muflow::http::client
