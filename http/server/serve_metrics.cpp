#include "http/server/serve_metrics.hpp"

#include <cstring>

namespace muflow::http {
namespace {

// Bucket bounds (seconds), as vLLM's: TTFT from 1 ms to 2560 s, ITL from 10 ms to 80 s,
// end-to-end from 0.3 s to 7680 s (vllm/v1/metrics/loggers.py), with finer low ends for a
// CPU engine whose tokens take milliseconds.
std::vector<double> ttft_bounds() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> itl_bounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,
          0.4,   0.5,    0.75,  1.0,  2.5,   5.0,  7.5,   10.0, 20.0, 40.0, 80.0};
}
std::vector<double> e2e_bounds() {
  return {0.01, 0.05, 0.1,  0.3,  0.5,  0.8,  1.0,   1.5,   2.0,   2.5,   5.0,    10.0,
          15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

}  // namespace

ServeMetrics::ServeMetrics() : ttft_(ttft_bounds()), itl_(itl_bounds()), e2e_(e2e_bounds()) {}

void ServeMetrics::on_admitted(int64_t prompt_tokens) {
  prompt_tokens_.fetch_add(prompt_tokens, std::memory_order_relaxed);
}

void ServeMetrics::on_rejected(const char* reason) {
  std::atomic<int64_t>* counter = &rejected_bad_request_;
  if (std::strcmp(reason, "queue_full") == 0) counter = &rejected_queue_full_;
  if (std::strcmp(reason, "unauthorized") == 0) counter = &rejected_unauthorized_;
  if (std::strcmp(reason, "too_large") == 0) counter = &rejected_too_large_;
  if (std::strcmp(reason, "shutting_down") == 0) counter = &rejected_shutting_down_;
  counter->fetch_add(1, std::memory_order_relaxed);
}

void ServeMetrics::on_finished(const char* finished_reason, double e2e_s) {
  std::atomic<int64_t>* counter = &finished_abort_;
  if (std::strcmp(finished_reason, "stop") == 0) counter = &finished_stop_;
  if (std::strcmp(finished_reason, "length") == 0) counter = &finished_length_;
  counter->fetch_add(1, std::memory_order_relaxed);
  e2e_.observe(e2e_s);
}

std::string ServeMetrics::render(const actors::EngineStats& stats, int64_t kv_cache_bytes,
                                 const std::string& model_name) const {
  PrometheusText p;
  const Labels model{{"model_name", model_name}};
  auto with = [&](std::string key, std::string value) {
    Labels l = model;
    l.emplace_back(std::move(key), std::move(value));
    return l;
  };
  auto load = [](const std::atomic<int64_t>& a) {
    return static_cast<double>(a.load(std::memory_order_relaxed));
  };

  p.family("muflow:num_requests_running", "gauge",
           "Requests admitted by the engine and unfinished.");
  p.sample("muflow:num_requests_running", model, static_cast<double>(stats.num_running));
  p.family("muflow:num_requests_waiting", "gauge",
           "Requests submitted but not yet admitted (batch or KV-cache limits).");
  p.sample("muflow:num_requests_waiting", model, static_cast<double>(stats.num_waiting));
  p.family("muflow:prompt_tokens_total", "counter", "Prompt tokens of admitted requests.");
  p.sample("muflow:prompt_tokens_total", model, load(prompt_tokens_));
  p.family("muflow:generation_tokens_total", "counter", "Generated tokens.");
  p.sample("muflow:generation_tokens_total", model, load(generation_tokens_));
  p.family("muflow:request_success_total", "counter",
           "Finished requests by reason (stop: EOS or a stop string; length: max_tokens or the "
           "context; abort: client disconnect or shutdown).");
  p.sample("muflow:request_success_total", with("finished_reason", "stop"), load(finished_stop_));
  p.sample("muflow:request_success_total", with("finished_reason", "length"),
           load(finished_length_));
  p.sample("muflow:request_success_total", with("finished_reason", "abort"), load(finished_abort_));
  p.family("muflow:request_errors_total", "counter",
           "Requests the engine failed (HTTP 500, or an error event in a stream): its wiring "
           "stopped and could not be recovered. Not in request_success_total.");
  p.sample("muflow:request_errors_total", model, load(errors_));
  p.family("muflow:requests_rejected_total", "counter",
           "HTTP requests refused, by reason (queue_full: by the server or the engine's queue).");
  p.sample("muflow:requests_rejected_total", with("reason", "queue_full"),
           load(rejected_queue_full_));
  p.sample("muflow:requests_rejected_total", with("reason", "bad_request"),
           load(rejected_bad_request_));
  p.sample("muflow:requests_rejected_total", with("reason", "unauthorized"),
           load(rejected_unauthorized_));
  p.sample("muflow:requests_rejected_total", with("reason", "too_large"),
           load(rejected_too_large_));
  p.sample("muflow:requests_rejected_total", with("reason", "shutting_down"),
           load(rejected_shutting_down_));

  p.family("muflow:time_to_first_token_seconds", "histogram",
           "Admission (parsed, tokenized, let in) to the first generated token.");
  p.histogram("muflow:time_to_first_token_seconds", model, ttft_.snapshot());
  p.family("muflow:inter_token_latency_seconds", "histogram",
           "Time between consecutive tokens of one request.");
  p.histogram("muflow:inter_token_latency_seconds", model, itl_.snapshot());
  p.family("muflow:e2e_request_latency_seconds", "histogram", "Admission to the request's end.");
  p.histogram("muflow:e2e_request_latency_seconds", model, e2e_.snapshot());

  p.family("muflow:device_busy_ratio", "gauge",
           "Fraction of the time since start each device computed (union of its stages' runs).");
  for (size_t d = 0; d < stats.metrics.device_busy_pct.size(); ++d) {
    p.sample("muflow:device_busy_ratio", with("device", std::to_string(d)),
             stats.metrics.device_busy_pct[d] / 100.0);
  }
  p.family("muflow:moe_expert_tokens_total", "counter",
           "Expert tokens (token-expert pairs) computed per MoE layer and device.");
  for (size_t b = 0; b < stats.moe_tokens.size(); ++b) {
    for (size_t d = 0; d < stats.moe_tokens[b].size(); ++d) {
      Labels l = model;
      l.emplace_back("layer", std::to_string(b));
      l.emplace_back("device", std::to_string(d));
      p.sample("muflow:moe_expert_tokens_total", l, static_cast<double>(stats.moe_tokens[b][d]));
    }
  }
  p.family("muflow:moe_balance", "gauge",
           "Mean over MoE layer steps of mean/max expert tokens per device (1 = balanced).");
  p.sample("muflow:moe_balance", model, stats.metrics.moe_balance);
  p.family("muflow:mu_queue_tokens", "gauge", "Tokens waiting in the mu-queues, per stage kind.");
  p.sample("muflow:mu_queue_tokens", with("stage_kind", "attention"),
           static_cast<double>(stats.queued_attention_tokens));
  p.sample("muflow:mu_queue_tokens", with("stage_kind", "expert"),
           static_cast<double>(stats.queued_expert_tokens));
  p.sample("muflow:mu_queue_tokens", with("stage_kind", "sampler"),
           static_cast<double>(stats.queued_sampler_tokens));
  p.family("muflow:all_to_all_seconds_total", "counter",
           "Seconds spent moving tokens in all-to-alls (0 for in-process channels).");
  p.sample("muflow:all_to_all_seconds_total", model, stats.metrics.all_to_all_s);
  p.family("muflow:worker_recoveries_total", "counter",
           "Worker processes lost and recovered from (an engine across processes; 0 in one).");
  int64_t lost = 0, rejoined = 0;
  for (const actors::RunRecovery& r : stats.recoveries) {
    if (!r.lost.empty()) ++lost;
    if (!r.rejoined.empty()) ++rejoined;  // one record may hold both (actors/coordinator.hpp)
  }
  p.sample("muflow:worker_recoveries_total", model, static_cast<double>(lost));
  p.family("muflow:worker_rejoins_total", "counter",
           "Wirings rebuilt to take back lost worker processes that answered again.");
  p.sample("muflow:worker_rejoins_total", model, static_cast<double>(rejoined));
  if (kv_cache_bytes >= 0) {
    p.family("muflow:kv_cache_bytes", "gauge", "KV-cache bytes held by all attention stages.");
    p.sample("muflow:kv_cache_bytes", model, static_cast<double>(kv_cache_bytes));
  }
  return p.str();
}

}  // namespace muflow::http
