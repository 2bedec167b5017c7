#pragma once
/// \file
/// What `GET /metrics` reports: the HTTP front end's request counters and latency histograms
/// (recorded as requests stream) plus the engine's live state (ServingEngine::stats), in the
/// Prometheus text format. Names follow vLLM's `vllm:` metrics where one exists, with the
/// `muflow:` prefix (vLLM: vllm/v1/metrics/loggers.py — num_requests_running/waiting,
/// prompt_tokens_total, generation_tokens_total, request_success_total{finished_reason},
/// time_to_first_token_seconds, inter_token_latency_seconds, e2e_request_latency_seconds).

#include <atomic>
#include <cstdint>
#include <string>

#include "actors/coordinator.hpp"
#include "http/server/prometheus_text.hpp"

namespace muflow::http {

/// Counters and histograms of one `muflow serve`. Thread-safe: any HTTP or engine thread
/// records; render reads.
class ServeMetrics {
 public:
  ServeMetrics();

  /// A request was admitted with `prompt_tokens` prompt tokens.
  void on_admitted(int64_t prompt_tokens);
  /// A request was refused before it reached the engine (`reason`: "queue_full",
  /// "bad_request", "unauthorized", "too_large", "shutting_down"), or by the engine at its
  /// arrival ("queue_full": the topology's `[scheduler] max_queued_requests`).
  void on_rejected(const char* reason);
  /// The first token of a request came `seconds` after its admission (parsed, tokenized and
  /// let in).
  void on_first_token(double seconds) { ttft_.observe(seconds); }
  /// A later token came `seconds` after the request's previous one.
  void on_inter_token(double seconds) { itl_.observe(seconds); }
  /// A token was generated (any request).
  void on_token() { generation_tokens_.fetch_add(1, std::memory_order_relaxed); }
  /// A request ended: `finished_reason` "stop", "length", "abort" (client gone, shutdown);
  /// `e2e_s` from its admission to its last token.
  void on_finished(const char* finished_reason, double e2e_s);
  /// A request the engine failed (HTTP 500, or an error event in a stream): its wiring stopped
  /// and could not be recovered. Counted apart from the finished ones, not in the e2e latency.
  void on_error() { errors_.fetch_add(1, std::memory_order_relaxed); }

  /// The exposition: these metrics plus `stats` (engine state now) and `kv_cache_bytes`
  /// (< 0: unknown, left out).
  std::string render(const actors::EngineStats& stats, int64_t kv_cache_bytes,
                     const std::string& model_name) const;

 private:
  std::atomic<int64_t> prompt_tokens_{0}, generation_tokens_{0};
  std::atomic<int64_t> finished_stop_{0}, finished_length_{0}, finished_abort_{0};
  std::atomic<int64_t> errors_{0};
  std::atomic<int64_t> rejected_queue_full_{0}, rejected_bad_request_{0}, rejected_unauthorized_{0},
      rejected_too_large_{0}, rejected_shutting_down_{0};
  Histogram ttft_, itl_, e2e_;
};

}  // namespace muflow::http
