#include "http/client/bench_metrics.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace muflow::http::client {
namespace {

using engine::serving::LatencyStats;
using Json = nlohmann::json;

LatencyStats stats_ms(const std::vector<double>& samples_s) {
  LatencyStats s;
  s.num_samples = static_cast<int64_t>(samples_s.size());
  if (samples_s.empty()) return s;
  std::vector<double> ms(samples_s.size());
  std::transform(samples_s.begin(), samples_s.end(), ms.begin(), [](double v) { return v * 1e3; });
  s.mean_ms = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  s.p50_ms = engine::serving::percentile_linear(ms, 50.0);
  s.p99_ms = engine::serving::percentile_linear(std::move(ms), 99.0);
  return s;
}

Json latency_json(const LatencyStats& s) {
  if (s.num_samples == 0) return nullptr;
  return {{"num_samples", s.num_samples},
          {"mean_ms", s.mean_ms},
          {"p50_ms", s.p50_ms},
          {"p99_ms", s.p99_ms}};
}

std::string line(const std::string& label, const std::string& value) {
  return absl::StrFormat("%-40s %s\n", label, value);
}

// "-----Title-----" centred in 50 columns, like vLLM's section rules.
std::string rule(const std::string& title, char fill) {
  const int width = 50;
  const int pad = std::max(0, width - static_cast<int>(title.size()));
  return std::string(pad / 2, fill) + title + std::string(pad - pad / 2, fill) + "\n";
}

}  // namespace

BenchMetrics summarize_http_load(const LoadRun& run) {
  BenchMetrics m;
  m.num_requests = static_cast<int64_t>(run.records.size());
  m.duration_s = run.duration_s;
  m.max_in_flight = run.max_in_flight;
  std::vector<double> ttfts, tpots, itls, e2els;
  double queue_sum = 0.0;
  int64_t num_sent = 0;
  // (kind, status) -> index into m.failures
  std::map<std::pair<std::string, int>, size_t> failure_index;
  for (const RequestRecord& rec : run.records) {
    const CompletionResult& r = rec.result;
    if (r.start_s > 0.0) {  // sent (requests a failed run never sent keep 0)
      queue_sum += std::max(0.0, r.start_s - rec.scheduled_s);
      ++num_sent;
    }
    if (!r.ok) {
      ++m.num_failed;
      const int status = r.failure == FailureKind::kHttpStatus ? r.http_status : 0;
      const auto key = std::make_pair(std::string(failure_kind_name(r.failure)), status);
      auto [it, inserted] = failure_index.try_emplace(key, m.failures.size());
      if (inserted) m.failures.push_back(FailureCount{key.first, 0, r.error, status});
      ++m.failures[it->second].count;
      continue;
    }
    ++m.num_successful;
    const int64_t out_tokens = r.num_output_tokens();
    m.total_input_tokens += rec.num_prompt_tokens;
    m.total_output_tokens += out_tokens;
    ttfts.push_back(r.ttft_s());
    e2els.push_back(r.latency_s());
    if (out_tokens > 1) {
      tpots.push_back((r.latency_s() - r.ttft_s()) / static_cast<double>(out_tokens - 1));
    }
    for (size_t k = 1; k < r.token_times_s.size(); ++k) {
      itls.push_back(r.token_times_s[k] - r.token_times_s[k - 1]);
    }
  }
  std::stable_sort(m.failures.begin(), m.failures.end(),
                   [](const FailureCount& a, const FailureCount& b) { return a.count > b.count; });
  if (m.duration_s > 0.0) {
    m.request_throughput = static_cast<double>(m.num_successful) / m.duration_s;
    m.output_token_throughput = static_cast<double>(m.total_output_tokens) / m.duration_s;
    m.total_token_throughput =
        static_cast<double>(m.total_input_tokens + m.total_output_tokens) / m.duration_s;
  }
  m.ttft = stats_ms(ttfts);
  m.tpot = stats_ms(tpots);
  m.itl = stats_ms(itls);
  m.e2el = stats_ms(e2els);
  m.mean_queue_ms = num_sent > 0 ? queue_sum / static_cast<double>(num_sent) * 1e3 : 0.0;
  return m;
}

std::string format_bench_report(const BenchMetrics& m, const BenchReportHeader& h) {
  std::string out = rule(" Serving Benchmark Result ", '=');
  if (!h.url.empty()) out += line("Server:", h.url);
  if (!h.model.empty()) out += line("Model:", h.model);
  if (!h.workload.empty()) out += line("Workload:", h.workload);
  out += line("Successful requests:", absl::StrCat(m.num_successful));
  out += line("Failed requests:", absl::StrCat(m.num_failed));
  if (h.max_concurrency > 0) {
    out += line("Maximum request concurrency:", absl::StrCat(h.max_concurrency));
  }
  out += line("Peak requests in flight:", absl::StrCat(m.max_in_flight));
  out += line("Benchmark duration (s):", absl::StrFormat("%.2f", m.duration_s));
  out += line("Total input tokens:", absl::StrCat(m.total_input_tokens));
  out += line("Total generated tokens:", absl::StrCat(m.total_output_tokens));
  out += line("Request throughput (req/s):", absl::StrFormat("%.2f", m.request_throughput));
  out +=
      line("Output token throughput (tok/s):", absl::StrFormat("%.2f", m.output_token_throughput));
  out += line("Total token throughput (tok/s):", absl::StrFormat("%.2f", m.total_token_throughput));
  out += line("Mean wait before sending (ms):", absl::StrFormat("%.2f", m.mean_queue_ms));
  for (const auto& [title, name, s] : {std::tuple<const char*, const char*, const LatencyStats*>{
                                           "Time to First Token", "TTFT", &m.ttft},
                                       {"Time per Output Token (excl. 1st token)", "TPOT", &m.tpot},
                                       {"Inter-token Latency", "ITL", &m.itl},
                                       {"End-to-end Latency", "E2EL", &m.e2el}}) {
    out += rule(title, '-');
    out += line(absl::StrCat("Mean ", name, " (ms):"), absl::StrFormat("%.2f", s->mean_ms));
    out += line(absl::StrCat("Median ", name, " (ms):"), absl::StrFormat("%.2f", s->p50_ms));
    out += line(absl::StrCat("P99 ", name, " (ms):"), absl::StrFormat("%.2f", s->p99_ms));
  }
  if (!m.failures.empty()) {
    out += rule("Failed Requests", '-');
    for (const FailureCount& f : m.failures) {
      const std::string kind = f.http_status > 0 ? absl::StrCat("HTTP ", f.http_status) : f.kind;
      out += line(absl::StrCat(kind, ":"), absl::StrCat(f.count, "  e.g. ", f.example));
    }
  }
  out += std::string(50, '=') + "\n";
  return out;
}

nlohmann::json bench_metrics_json(const BenchMetrics& m) {
  Json failures = Json::array();
  for (const FailureCount& f : m.failures) {
    failures.push_back({{"kind", f.kind},
                        {"http_status", f.http_status},
                        {"count", f.count},
                        {"example", f.example}});
  }
  return {{"num_requests", m.num_requests},
          {"successful", m.num_successful},
          {"failed", m.num_failed},
          {"duration_s", m.duration_s},
          {"max_in_flight", m.max_in_flight},
          {"total_input_tokens", m.total_input_tokens},
          {"total_output_tokens", m.total_output_tokens},
          {"request_throughput", m.request_throughput},
          {"output_token_throughput", m.output_token_throughput},
          {"total_token_throughput", m.total_token_throughput},
          {"mean_queue_ms", m.mean_queue_ms},
          {"ttft", latency_json(m.ttft)},
          {"tpot", latency_json(m.tpot)},
          {"itl", latency_json(m.itl)},
          {"e2el", latency_json(m.e2el)},
          {"failures", failures}};
}

nlohmann::json request_record_json(const RequestRecord& rec) {
  const CompletionResult& r = rec.result;
  Json itl = Json::array();
  for (size_t k = 1; k < r.token_times_s.size(); ++k) {
    itl.push_back((r.token_times_s[k] - r.token_times_s[k - 1]) * 1e3);
  }
  Json j = {{"id", rec.id},
            {"scheduled_s", rec.scheduled_s},
            {"sent_s", r.start_s},
            {"ok", r.ok},
            {"prompt_tokens", rec.num_prompt_tokens},
            {"max_tokens", rec.max_tokens},
            {"output_tokens", r.num_output_tokens()},
            {"ttft_ms", r.token_times_s.empty() ? Json(nullptr) : Json(r.ttft_s() * 1e3)},
            {"e2e_ms", r.token_times_s.empty() ? Json(nullptr) : Json(r.latency_s() * 1e3)},
            {"itl_ms", itl},
            {"finish_reason", r.finish_reason},
            {"http_status", r.http_status}};
  if (!r.ok) {
    j["failure"] = failure_kind_name(r.failure);
    j["error"] = r.error;
    if (r.retry_after_s >= 0) j["retry_after_s"] = r.retry_after_s;
  }
  return j;
}

}  // namespace muflow::http::client
