#include "engine/serving/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_format.h"
#include "kernels/assert.hpp"

namespace muflow::engine::serving {
namespace {

LatencyStats latency_stats(const std::vector<double>& samples_s) {
  LatencyStats stats;
  stats.num_samples = static_cast<int64_t>(samples_s.size());
  if (samples_s.empty()) return stats;
  std::vector<double> ms(samples_s.size());
  std::transform(samples_s.begin(), samples_s.end(), ms.begin(),
                 [](double s) { return s * 1e3; });
  stats.mean_ms = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  stats.p50_ms = percentile_linear(ms, 50.0);
  stats.p99_ms = percentile_linear(std::move(ms), 99.0);
  return stats;
}

// Stats of folded samples plus live ones: exactly latency_stats of every value while the
// folded ones are all kept; past the capacity the count and mean stay exact and the
// percentiles are those of the kept sample joined with the live values.
LatencyStats latency_stats(const LatencySamples& folded, const std::vector<double>& live_s) {
  std::vector<double> all = folded.samples();
  all.insert(all.end(), live_s.begin(), live_s.end());
  LatencyStats stats = latency_stats(all);
  if (folded.count() > folded.capacity()) {
    stats.num_samples = folded.count() + static_cast<int64_t>(live_s.size());
    const double sum = folded.sum() + std::accumulate(live_s.begin(), live_s.end(), 0.0);
    stats.mean_ms = 1e3 * sum / static_cast<double>(stats.num_samples);
  }
  return stats;
}

// mean / max of one MoE sample into *sum (and one more sample); nothing when no tokens.
void add_balance(const std::vector<int64_t>& tokens, double* sum, int64_t* samples) {
  const int64_t max_tokens = *std::max_element(tokens.begin(), tokens.end());
  if (max_tokens == 0) return;
  const double mean =
      static_cast<double>(std::accumulate(tokens.begin(), tokens.end(), int64_t{0})) /
      static_cast<double>(tokens.size());
  *sum += mean / static_cast<double>(max_tokens);
  ++*samples;
}

// Total length of the union of intervals.
double union_length(std::vector<std::pair<double, double>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  double total = 0.0, cur_begin = 0.0, cur_end = 0.0;
  bool open = false;
  for (const auto& [b, e] : intervals) {
    if (open && b <= cur_end) {
      cur_end = std::max(cur_end, e);
      continue;
    }
    if (open) total += cur_end - cur_begin;
    cur_begin = b;
    cur_end = e;
    open = true;
  }
  if (open) total += cur_end - cur_begin;
  return total;
}

nlohmann::json latency_json(const LatencyStats& s) {
  if (s.num_samples == 0) return nullptr;
  return {{"num_samples", s.num_samples},
          {"mean_ms", s.mean_ms},
          {"p50_ms", s.p50_ms},
          {"p99_ms", s.p99_ms}};
}

}  // namespace

double percentile_linear(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double h = (static_cast<double>(values.size()) - 1.0) * std::clamp(q, 0.0, 100.0) / 100.0;
  const size_t lo = static_cast<size_t>(std::floor(h));
  if (lo + 1 >= values.size()) return values.back();
  return values[lo] + (h - static_cast<double>(lo)) * (values[lo + 1] - values[lo]);
}

MetricsRecorder::MetricsRecorder(int64_t num_devices, int64_t latency_capacity)
    : num_devices_(num_devices),
      busy_(static_cast<size_t>(std::max<int64_t>(num_devices, 0))),
      layer_s_(latency_capacity),
      ttft_folded_(latency_capacity),
      itl_folded_(latency_capacity),
      busy_folded_s_(busy_.size(), 0.0),
      busy_folded_until_(busy_.size(), -std::numeric_limits<double>::infinity()) {
  MUFLOW_ASSERT(num_devices >= 1, "MetricsRecorder needs at least one device");
}

MetricsRecorder::RequestTimes& MetricsRecorder::request(int64_t request_id) {
  auto it = requests_.find(request_id);
  MUFLOW_ASSERT(it != requests_.end(), "metrics event for a request that never arrived");
  return it->second;
}

void MetricsRecorder::on_arrival(int64_t request_id, double t_s) {
  MUFLOW_ASSERT(requests_.count(request_id) == 0, "request arrived twice");
  requests_[request_id].arrival_s = t_s;
  if (!any_event_ || t_s < first_s_) first_s_ = t_s;
  if (!any_event_ || t_s > last_s_) last_s_ = t_s;
  any_event_ = true;
}

void MetricsRecorder::on_token(int64_t request_id, double t_s) {
  request(request_id).token_s.push_back(t_s);
  last_s_ = std::max(last_s_, t_s);
}

void MetricsRecorder::on_finish(int64_t request_id, double t_s) {
  request(request_id).finish_s = t_s;
  last_s_ = std::max(last_s_, t_s);
}

void MetricsRecorder::on_cancel(int64_t request_id) { request(request_id).cancelled = true; }

void MetricsRecorder::on_device_busy(int64_t device, double begin_s, double end_s) {
  MUFLOW_ASSERT(device >= 0 && device < num_devices_, "device index out of range");
  MUFLOW_ASSERT(end_s >= begin_s, "busy interval ends before it begins");
  const auto d = static_cast<size_t>(device);
  // After compact(): only the part after the folded intervals counts (they are in the total).
  const double begin = std::max(begin_s, busy_folded_until_[d]);
  if (end_s > begin) {
    // An interval that starts inside the last one joins it: the same connected pieces, so
    // union_length gives the same seconds, and a device busy back to back holds one interval,
    // not one per stage run (#19 item 6).
    std::vector<std::pair<double, double>>& v = busy_[d];
    if (!v.empty() && begin >= v.back().first && begin <= v.back().second) {
      v.back().second = std::max(v.back().second, end_s);
    } else {
      v.emplace_back(begin, end_s);
    }
  }
  if (!any_event_ || begin_s < first_s_) first_s_ = begin_s;
  last_s_ = any_event_ ? std::max(last_s_, end_s) : end_s;
  any_event_ = true;
}

void MetricsRecorder::on_expert_tokens(int64_t block, int64_t iteration, int64_t device,
                                       int64_t num_tokens) {
  MUFLOW_ASSERT(device >= 0 && device < num_devices_, "device index out of range");
  MUFLOW_ASSERT(num_tokens >= 0, "negative token count");
  max_moe_iteration_ = std::max(max_moe_iteration_, iteration);
  auto& tokens = moe_tokens_[{block, iteration}];
  tokens.resize(static_cast<size_t>(num_devices_), 0);
  tokens[static_cast<size_t>(device)] += num_tokens;
}

void MetricsRecorder::on_layer_iteration(int64_t block, int64_t iteration,
                                         const std::vector<int64_t>& tokens_per_device) {
  MUFLOW_ASSERT(static_cast<int64_t>(tokens_per_device.size()) == num_devices_,
                "tokens_per_device needs one entry per device");
  if (tokens_per_device.empty()) return;  // no device: nothing to record (as before)
  // on_expert_tokens for every device, with one lookup (a barrier of 1,024 devices reports
  // here once per block and iteration).
  for (const int64_t n : tokens_per_device) MUFLOW_ASSERT(n >= 0, "negative token count");
  max_moe_iteration_ = std::max(max_moe_iteration_, iteration);
  auto& tokens = moe_tokens_[{block, iteration}];
  tokens.resize(static_cast<size_t>(num_devices_), 0);
  for (size_t d = 0; d < tokens_per_device.size(); ++d) tokens[d] += tokens_per_device[d];
}

void MetricsRecorder::on_layer_start(int64_t block, int64_t iteration, double t_s) {
  layer_start_s_[{block, iteration}] = t_s;
}

void MetricsRecorder::on_layer_end(int64_t block, int64_t iteration, double t_s,
                                   const std::vector<double>& finish_s) {
  auto it = layer_start_s_.find({block, iteration});
  if (it == layer_start_s_.end()) return;
  const double duration = t_s - it->second;
  layer_start_s_.erase(it);
  layer_s_.add(duration);
  if (duration <= 0) return;
  double last = -1.0;
  for (double f : finish_s) last = std::max(last, f);
  for (double f : finish_s) {
    if (f < 0) continue;
    idle_fraction_sum_ += (last - f) / duration;
    ++idle_samples_;
  }
}

void MetricsRecorder::summarize_load_window(const std::map<int64_t, RequestTimes>& requests,
                                            RunMetrics& m) {
  if (requests.size() < 2) return;
  double first = std::numeric_limits<double>::infinity();
  double last = -first;
  for (const auto& [id, r] : requests) {
    first = std::min(first, r.arrival_s);
    last = std::max(last, r.arrival_s);
  }
  // Arrivals that span a sliver of the run are a closed batch (e.g. a rate of 1e12/s), not a
  // load: its "window" of nanoseconds would give the configured rate back as arrivals per
  // second and hold no token.
  if (!(last > first) || last - first < kMinLoadSpan * m.duration_s) return;
  const double begin = first + 0.5 * (last - first);
  const auto inside = [&](double t) { return t >= begin && t < last; };
  int64_t arrivals = 0, completions = 0, tokens = 0;
  for (const auto& [id, r] : requests) {
    arrivals += inside(r.arrival_s) ? 1 : 0;
    completions += r.finish_s >= 0 && inside(r.finish_s) ? 1 : 0;
    for (double t : r.token_s) tokens += inside(t) ? 1 : 0;
  }
  m.load_window_s = last - begin;
  m.load_arrivals_per_s = static_cast<double>(arrivals) / m.load_window_s;
  m.load_completions_per_s = static_cast<double>(completions) / m.load_window_s;
  m.load_output_tokens_per_s = static_cast<double>(tokens) / m.load_window_s;
}

std::vector<std::vector<int64_t>> MetricsRecorder::moe_tokens_by_block() const {
  std::vector<std::vector<int64_t>> out = moe_block_folded_;
  for (const auto& [key, per_device] : moe_tokens_) {
    const auto block = static_cast<size_t>(key.first);
    if (block >= out.size()) out.resize(block + 1);
    if (out[block].empty()) out[block].assign(static_cast<size_t>(num_devices_), 0);
    for (size_t d = 0; d < per_device.size() && d < out[block].size(); ++d) {
      out[block][d] += per_device[d];
    }
  }
  return out;
}

void MetricsRecorder::compact() {
  compacted_ = true;
  for (auto it = requests_.begin(); it != requests_.end();) {
    const RequestTimes& r = it->second;
    if (r.finish_s < 0 && !r.cancelled) {
      ++it;
      continue;
    }
    ++folded_requests_;
    if (r.finish_s >= 0) ++folded_completed_;
    folded_tokens_ += static_cast<int64_t>(r.token_s.size());
    if (!r.token_s.empty()) ttft_folded_.add(r.token_s.front() - r.arrival_s);
    for (size_t i = 1; i < r.token_s.size(); ++i) itl_folded_.add(r.token_s[i] - r.token_s[i - 1]);
    it = requests_.erase(it);
  }
  for (size_t d = 0; d < busy_.size(); ++d) {
    if (busy_[d].empty()) continue;
    busy_folded_s_[d] += union_length(busy_[d]);
    for (const auto& [b, e] : busy_[d]) busy_folded_until_[d] = std::max(busy_folded_until_[d], e);
    busy_[d] = {};
  }
  for (auto it = moe_tokens_.begin(); it != moe_tokens_.end();) {
    const auto [block, iteration] = it->first;
    if (iteration >= max_moe_iteration_ - kMoeFoldLag) {
      ++it;
      continue;
    }
    add_balance(it->second, &moe_balance_folded_, &moe_samples_folded_);
    const auto b = static_cast<size_t>(block);
    if (b >= moe_block_folded_.size()) moe_block_folded_.resize(b + 1);
    if (moe_block_folded_[b].empty()) moe_block_folded_[b].assign(it->second.size(), 0);
    for (size_t d = 0; d < it->second.size(); ++d) moe_block_folded_[b][d] += it->second[d];
    it = moe_tokens_.erase(it);
  }
  // A layer start whose end never came (a run across processes that stopped mid-layer) is
  // dropped once it is as old as the folded MoE samples.
  for (auto it = layer_start_s_.begin(); it != layer_start_s_.end();) {
    it = it->first.second < max_moe_iteration_ - kMoeFoldLag ? layer_start_s_.erase(it)
                                                             : std::next(it);
  }
}

RunMetrics MetricsRecorder::summarize(double wall_s) const {
  RunMetrics m;
  m.num_requests = folded_requests_ + static_cast<int64_t>(requests_.size());
  m.num_completed_requests = folded_completed_;
  m.num_rejected_requests = rejected_;
  m.num_output_tokens = folded_tokens_;
  std::vector<double> ttft_s, itl_s;
  for (const auto& [id, r] : requests_) {
    if (r.finish_s >= 0) ++m.num_completed_requests;
    m.num_output_tokens += static_cast<int64_t>(r.token_s.size());
    if (r.token_s.empty()) continue;
    ttft_s.push_back(r.token_s.front() - r.arrival_s);
    for (size_t i = 1; i < r.token_s.size(); ++i) itl_s.push_back(r.token_s[i] - r.token_s[i - 1]);
  }
  m.ttft = latency_stats(ttft_folded_, ttft_s);
  m.itl = latency_stats(itl_folded_, itl_s);
  m.duration_s = wall_s > 0 ? wall_s : (any_event_ ? last_s_ - first_s_ : 0.0);
  if (!compacted_) summarize_load_window(requests_, m);
  m.output_tokens_per_s =
      m.duration_s > 0 ? static_cast<double>(m.num_output_tokens) / m.duration_s : 0.0;
  for (size_t d = 0; d < busy_.size(); ++d) {
    const double busy_s = busy_folded_s_[d] + union_length(busy_[d]);
    m.device_busy_pct.push_back(m.duration_s > 0 ? 100.0 * busy_s / m.duration_s : 0.0);
  }
  double balance_sum = moe_balance_folded_;
  m.num_moe_samples = moe_samples_folded_;
  for (const auto& [key, tokens] : moe_tokens_) add_balance(tokens, &balance_sum, &m.num_moe_samples);
  if (m.num_moe_samples > 0) m.moe_balance = balance_sum / static_cast<double>(m.num_moe_samples);
  m.moe_layer = latency_stats(layer_s_, {});
  if (idle_samples_ > 0) {
    m.moe_idle_pct = 100.0 * idle_fraction_sum_ / static_cast<double>(idle_samples_);
  }
  m.tokens_rebalanced = tokens_rebalanced_;
  m.dispatch_rows = dispatch_rows_;
  m.dispatch_remote_rows = dispatch_remote_;
  m.combine_rows = combine_rows_;
  m.combine_remote_rows = combine_remote_;
  m.expert_fetches = expert_fetches_;
  m.expert_restores = expert_restores_;
  m.fetch_stall_s = fetch_stall_s_;
  return m;
}

std::string format_metrics_table(const RunMetrics& m,
                                 const std::vector<std::string>& device_names) {
  std::string out;
  const auto row = [&](const std::string& label, const std::string& value) {
    absl::StrAppendFormat(&out, "  %-24s %s\n", label, value);
  };
  const auto latency = [](const LatencyStats& s) -> std::string {
    if (s.num_samples == 0) return "-";
    return absl::StrFormat("mean %.2f  p50 %.2f  p99 %.2f ms  (n=%d)", s.mean_ms, s.p50_ms,
                           s.p99_ms, s.num_samples);
  };
  out += "run metrics\n";
  row("requests completed", absl::StrFormat("%d / %d", m.num_completed_requests, m.num_requests));
  if (m.num_rejected_requests > 0) {
    row("requests rejected", absl::StrFormat("%d  (queue full: [scheduler] max_queued_requests)",
                                             m.num_rejected_requests));
  }
  row("output tokens", absl::StrFormat("%d", m.num_output_tokens));
  row("duration", absl::StrFormat("%.3f s", m.duration_s));
  row("output throughput", absl::StrFormat("%.2f tokens/s", m.output_tokens_per_s));
  if (m.load_window_s > 0) {
    row("under load",
        absl::StrFormat("%.2f tokens/s; requests in %.1f/s, done %.1f/s  (second half of "
                        "the arrivals, %.3f s)",
                        m.load_output_tokens_per_s, m.load_arrivals_per_s, m.load_completions_per_s,
                        m.load_window_s));
  }
  row("time to first token", latency(m.ttft));
  row("inter-token latency", latency(m.itl));
  row("MoE balance (mean/max)",
      m.num_moe_samples == 0 ? "-"
                             : absl::StrFormat("%.3f  (1.000 = perfect, %d samples)",
                                               m.moe_balance, m.num_moe_samples));
  if (m.all_to_all_s > 0) {
    row("time in all-to-all",
        absl::StrFormat("%.3f s  (%.1f %% of the run; lower bound b_max %.3f s)", m.all_to_all_s,
                        m.duration_s > 0 ? 100.0 * m.all_to_all_s / m.duration_s : 0.0,
                        m.all_to_all_bound_s));
  }
  if (m.moe_layer.num_samples > 0) {
    row("MoE layer", latency(m.moe_layer));
    row("MoE idle at combine", absl::StrFormat("%.1f %% of the layer", m.moe_idle_pct));
  }
  if (m.dispatch_rows + m.combine_rows > 0) {
    auto pct = [](int64_t part, int64_t whole) { return whole > 0 ? 100.0 * part / whole : 0.0; };
    row("all-to-all rows off-device",
        absl::StrFormat("dispatch %d / %d (%.1f %%), combine %d / %d (%.1f %%)",
                        m.dispatch_remote_rows, m.dispatch_rows,
                        pct(m.dispatch_remote_rows, m.dispatch_rows), m.combine_remote_rows,
                        m.combine_rows, pct(m.combine_remote_rows, m.combine_rows)));
  }
  if (m.tokens_rebalanced > 0 || m.expert_fetches > 0) {
    row("rebalanced tokens", absl::StrFormat("%d", m.tokens_rebalanced));
    row("expert fetches", absl::StrFormat("%d  (restores %d, stalled %.3f s)", m.expert_fetches,
                                          m.expert_restores, m.fetch_stall_s));
  }
  for (size_t d = 0; d < m.device_busy_pct.size(); ++d) {
    const std::string name =
        d < device_names.size() ? device_names[d] : absl::StrFormat("dev%d", d);
    row(absl::StrFormat("busy %s", name), absl::StrFormat("%.1f %%", m.device_busy_pct[d]));
  }
  return out;
}

double RunMetrics::remote_rows_pct() const {
  const int64_t rows = dispatch_rows + combine_rows;
  return rows > 0 ? 100.0 * static_cast<double>(dispatch_remote_rows + combine_remote_rows) /
                        static_cast<double>(rows)
                  : 0.0;
}

nlohmann::json to_json(const RunMetrics& m) {
  return {{"num_requests", m.num_requests},
          {"num_completed_requests", m.num_completed_requests},
          {"num_rejected_requests", m.num_rejected_requests},
          {"num_output_tokens", m.num_output_tokens},
          {"duration_s", m.duration_s},
          {"output_tokens_per_s", m.output_tokens_per_s},
          {"load_window_s", m.load_window_s},
          {"load_arrivals_per_s", m.load_arrivals_per_s},
          {"load_completions_per_s", m.load_completions_per_s},
          {"load_output_tokens_per_s", m.load_output_tokens_per_s},
          {"ttft", latency_json(m.ttft)},
          {"itl", latency_json(m.itl)},
          {"device_busy_pct", m.device_busy_pct},
          {"moe_balance", m.num_moe_samples > 0 ? nlohmann::json(m.moe_balance) : nullptr},
          {"num_moe_samples", m.num_moe_samples},
          {"all_to_all_s", m.all_to_all_s},
          {"all_to_all_bound_s", m.all_to_all_bound_s},
          {"moe_layer", latency_json(m.moe_layer)},
          {"moe_idle_pct", m.moe_layer.num_samples > 0 ? nlohmann::json(m.moe_idle_pct) : nullptr},
          {"tokens_rebalanced", m.tokens_rebalanced},
          {"dispatch_rows", m.dispatch_rows},
          {"dispatch_remote_rows", m.dispatch_remote_rows},
          {"combine_rows", m.combine_rows},
          {"combine_remote_rows", m.combine_remote_rows},
          {"expert_fetches", m.expert_fetches},
          {"expert_restores", m.expert_restores},
          {"fetch_stall_s", m.fetch_stall_s}};
}

}  // namespace muflow::engine::serving
