#pragma once
/// \file
/// The summary `muflow bench --url` prints for a run against a server, with the definitions
/// of `vllm bench serve` (vllm-project/vllm, vllm/benchmarks/serve.py, `calculate_metrics`,
/// commit def9ce85ba1079af970a58ed3d42dd861ae35d58; the older benchmarks/benchmark_serving.py,
/// e.g. at commit 8668d7c05027b98ac66bd5540955dd2ce3a0f318, defines TTFT, TPOT, ITL and E2EL
/// the same way but counts output tokens by re-tokenising the generated text):
///
/// - a request counts as successful when its CompletionResult is ok; every sum, rate and
///   latency below is over successful requests only;
/// - TTFT: first token event - send time;
/// - E2E latency (vLLM's E2EL): last token event - send time;
/// - TPOT (time per output token, excluding the first): (E2E - TTFT) / (output tokens - 1),
///   one sample per request with more than one output token;
/// - ITL: every gap between consecutive token events of a request, pooled over requests;
/// - output tokens of a request: usage.completion_tokens (else its token events);
///   input tokens: the prompt ids sent;
/// - request throughput = successful requests / duration; output token throughput = output
///   tokens / duration; total token throughput = (input + output tokens) / duration, with
///   duration from the start of the run until the last request ended.
///
/// Mean, median (p50) and p99 use engine::serving::percentile_linear (NumPy's linear
/// percentile, as vLLM's np.percentile / np.median), in milliseconds.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/serving/metrics.hpp"
#include "http/client/http_load.hpp"

namespace muflow::http::client {

/// Failed requests of one cause.
struct FailureCount {
  std::string kind;  ///< failure_kind_name(), e.g. "http_status", "dropped"
  int64_t count = 0;
  std::string example;  ///< the first such request's error message
  /// For "http_status": the status; 0 otherwise.
  int http_status = 0;
};

/// The summary of one run (see the file comment for the definitions).
struct BenchMetrics {
  int64_t num_requests = 0;
  int64_t num_successful = 0;
  int64_t num_failed = 0;
  double duration_s = 0.0;
  int64_t max_in_flight = 0;                            ///< most requests in flight at once
  int64_t total_input_tokens = 0;                       ///< over successful requests
  int64_t total_output_tokens = 0;                      ///< over successful requests
  double request_throughput = 0.0;                      ///< requests / s
  double output_token_throughput = 0.0;                 ///< tokens / s
  double total_token_throughput = 0.0;                  ///< tokens / s
  engine::serving::LatencyStats ttft, tpot, itl, e2el;  ///< ms; p50 is the median
  /// Mean of (send time - arrival time) over all sent requests, ms: how long requests waited
  /// for a free slot under max_concurrency (or for the scheduler). Not a vLLM metric.
  double mean_queue_ms = 0.0;
  /// By cause, most frequent first; HTTP statuses are counted separately (429 vs 503).
  std::vector<FailureCount> failures;
};

/// Summarises `run`. Pure; any thread. Every rate is 0 when duration_s is 0.
BenchMetrics summarize_http_load(const LoadRun& run);

/// Context printed above the numbers.
struct BenchReportHeader {
  std::string url;
  std::string model;
  int64_t max_concurrency = 0;  ///< 0 = no cap (not printed)
  std::string workload;         ///< e.g. "poisson, 4 req/s, 64 requests"
};

/// The report as text, laid out like `vllm bench serve`'s (one "label: value" per line,
/// TTFT/TPOT/ITL/E2E blocks), plus the failures by cause. Pure.
std::string format_bench_report(const BenchMetrics& metrics, const BenchReportHeader& header);

/// The summary as a JSON object: "num_requests", "successful", "failed", "duration_s",
/// "max_in_flight", "total_input_tokens", "total_output_tokens", "request_throughput",
/// "output_token_throughput", "total_token_throughput" (per second), "mean_queue_ms";
/// "ttft", "tpot", "itl", "e2el" as {"num_samples", "mean_ms", "p50_ms", "p99_ms"} (null
/// without samples, as engine::serving's metrics JSON); "failures": [{"kind",
/// "http_status", "count", "example"}]. Pure.
nlohmann::json bench_metrics_json(const BenchMetrics& metrics);

/// One request's record as a JSON object (for a results file written as requests finish):
/// id, scheduled_s, sent_s, ok, error, failure, http_status, retry_after_s, prompt_tokens,
/// output_tokens, ttft_ms, e2e_ms, itl_ms [gaps], finish_reason. Pure.
nlohmann::json request_record_json(const RequestRecord& record);

}  // namespace muflow::http::client
