#pragma once
/// \file
/// Serving metrics of one run: throughput, time to first token (TTFT), inter-token latency
/// (ITL), per-device busy time and MoE load balance. The coordinator records events; the CLI
/// prints the summary as a table or JSON.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/serving/latency_samples.hpp"

namespace muflow::engine::serving {

/// The q-th percentile (q in [0, 100]) of `values` by linear interpolation between closest
/// ranks (NumPy's default "linear" method): sort ascending, h = (n - 1) * q / 100, result
/// = x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)]). So p50 of {1, 2, 3, 4}
/// is 2.5 and p99 is 3.97. Returns 0 for an empty input. Pure; any thread.
double percentile_linear(std::vector<double> values, double q);

/// Mean, median and 99th percentile of a latency sample, in milliseconds.
struct LatencyStats {
  int64_t num_samples = 0;  ///< 0 = nothing measured (the other fields are then 0)
  double mean_ms = 0.0;
  double p50_ms = 0.0;      ///< percentile_linear(samples, 50)
  double p99_ms = 0.0;      ///< percentile_linear(samples, 99)
};

/// The load window (RunMetrics::load_window_s) needs arrivals that span at least this fraction
/// of the run's duration.
inline constexpr double kMinLoadSpan = 0.01;

/// Summary of one run (MetricsRecorder::summarize).
struct RunMetrics {
  int64_t num_requests = 0;            ///< requests that arrived
  int64_t num_completed_requests = 0;  ///< requests that finished
  int64_t num_rejected_requests = 0;   ///< refused at arrival (`[scheduler] max_queued_requests`)
  int64_t num_output_tokens = 0;       ///< generated tokens over all requests
  double duration_s = 0.0;             ///< wall time the rates below are taken over
  double output_tokens_per_s = 0.0;    ///< num_output_tokens / duration_s
  /// The load window: the second half of the arrival span, [t_mid, t_last) with t_first /
  /// t_last the first and last arrival and t_mid their midpoint. The rates over it say
  /// whether the engine keeps up while requests still arrive (completions per second vs
  /// arrivals per second: AsyncMoE Fig. 12's input vs output rate), without the warm-up at
  /// the start and the drain after the last arrival that output_tokens_per_s includes. While
  /// the engine keeps up, load_output_tokens_per_s is the offered load (plus catch-up from
  /// the first half), not a capacity; when completions fall behind arrivals over a span long
  /// against a request's lifetime, it approaches the sustained throughput. All four are 0
  /// when fewer than 2 requests arrived, or their arrivals span less than kMinLoadSpan of the
  /// run's duration (a closed batch, all at once or nearly).
  double load_window_s = 0.0;             ///< t_last - t_mid, seconds
  double load_arrivals_per_s = 0.0;       ///< requests arriving in the window / its length
  double load_completions_per_s = 0.0;    ///< requests finishing in the window / its length
  double load_output_tokens_per_s = 0.0;  ///< tokens produced in the window / its length
  LatencyStats ttft;                   ///< first token time - arrival, per request
  LatencyStats itl;                    ///< gap between consecutive tokens of one request
  std::vector<double> device_busy_pct; ///< [num_devices] union of busy intervals / duration
  /// Mean over (block, iteration) samples of mean/max tokens per device in MoE layers:
  /// 1.0 = every device got the same number of expert tokens; 1/num_devices = one device
  /// got them all. 0 when num_moe_samples is 0.
  double moe_balance = 0.0;
  int64_t num_moe_samples = 0;         ///< (block, iteration) pairs with at least one token
  /// Virtual-time runs: seconds spent moving data in all-to-alls (barrier completion to the
  /// last delivery), summed over every dispatch and combine; 0 when transfers are in memory.
  double all_to_all_s = 0.0;
  /// Sum over the same all-to-alls of their lower bound under the network's own model
  /// (transport::port_load_lower_bound, over every byte the all-to-all moved; exflow: K/V rows
  /// included): "serial", the busiest port's total holding time (>= Aurora's b_max, strictly
  /// with mixed bandwidths); "fair-share", b_max (Theorems 4.2/5.2) per link class plus the
  /// least latency of the busiest resource's flows. all_to_all_s / all_to_all_bound_s >= 1 is
  /// how far the transmission order (`[network] a2a_order`) is from optimal; 0 when transfers
  /// are in memory.
  double all_to_all_bound_s = 0.0;
  /// Barrier wirings: per (block, iteration), dispatch barrier completion to combine barrier
  /// completion (the MoE layer: transfers, expert compute and waiting). Empty under async.
  LatencyStats moe_layer;
  /// Barrier wirings: mean over MoE layers and expert devices of (the layer's last expert
  /// device to finish − this device's finish) / the layer's time, in %: how long devices idle
  /// at the combine barrier (HarMoEny §3 / §5.3's "idle time"). 0 without samples.
  double moe_idle_pct = 0.0;
  int64_t tokens_rebalanced = 0;  ///< harmoeny: expert tokens computed away from their home
  int64_t expert_fetches = 0;     ///< harmoeny: foreign experts copied into slots
  int64_t expert_restores = 0;    ///< harmoeny: home experts copied back afterwards
  double fetch_stall_s = 0.0;     ///< harmoeny: device seconds waiting for expert copies
  /// Barrier wirings: token rows the dispatch / combine all-to-alls delivered (a token counts
  /// once per top-k expert), and how many of them crossed to another device. ExFlow's
  /// context coherence and affinity placement exist to cut the remote ones (§IV).
  int64_t dispatch_rows = 0, dispatch_remote_rows = 0;
  int64_t combine_rows = 0, combine_remote_rows = 0;
  /// (dispatch + combine remote rows) / (dispatch + combine rows) in %; 0 without rows.
  double remote_rows_pct() const;
};

/// Records the events of one run and summarises them.
///
/// Times are seconds on one clock (wall or virtual) shared by all calls. Single owner: the
/// coordinator actor; not thread-safe (no locking). Preconditions (checked with
/// MUFLOW_ASSERT, they are the caller's invariants, not user input): device indices in
/// [0, num_devices); on_token / on_finish only for requests that arrived.
class MetricsRecorder {
 public:
  /// `latency_capacity`: TTFT / ITL / MoE-layer samples kept for percentiles once compact()
  /// folds them (LatencySamples).
  explicit MetricsRecorder(int64_t num_devices, int64_t latency_capacity = int64_t{1} << 20);

  /// Request `request_id` arrived (was admitted) at `t_s`.
  void on_arrival(int64_t request_id, double t_s);
  /// One output token of `request_id` was produced at `t_s`; the first gives its TTFT, the
  /// following ones its inter-token gaps.
  void on_token(int64_t request_id, double t_s);
  /// `request_id` finished (EOS or max_new_tokens) at `t_s`.
  void on_finish(int64_t request_id, double t_s);
  /// `request_id` was cancelled: it counts as a request, its tokens as output, but not as
  /// completed; compact() may fold it.
  void on_cancel(int64_t request_id);
  /// `request_id` was rejected at arrival (admission limit): counted as a request and in
  /// num_rejected_requests, never completed; compact() may fold it.
  void on_reject(int64_t request_id) {
    on_cancel(request_id);
    ++rejected_;
  }
  /// `device` computed from begin_s to end_s (end_s >= begin_s). Overlapping intervals of one
  /// device count once.
  void on_device_busy(int64_t device, double begin_s, double end_s);
  /// In MoE block `block` of iteration `iteration`, `device` computed `num_tokens` expert
  /// tokens (token-expert pairs). Calls for the same (block, iteration, device) add up.
  void on_expert_tokens(int64_t block, int64_t iteration, int64_t device, int64_t num_tokens);
  /// All devices at once: tokens_per_device has [num_devices] entries (adds up like above).
  void on_layer_iteration(int64_t block, int64_t iteration,
                          const std::vector<int64_t>& tokens_per_device);

  /// Block `block` of iteration `iteration`: dispatch barrier completed at `t_s`.
  void on_layer_start(int64_t block, int64_t iteration, double t_s);
  /// Its combine barrier completed at `t_s`; `finish_s[d]` is when device d's last expert
  /// stage of the layer finished (< 0: device d hosts no expert stage). Ignored without a
  /// matching on_layer_start.
  void on_layer_end(int64_t block, int64_t iteration, double t_s,
                    const std::vector<double>& finish_s);
  /// HarMoEny: `tokens` expert tokens were scheduled away from their expert's home device.
  void on_rebalance(int64_t tokens) { tokens_rebalanced_ += tokens; }
  /// HarMoEny: a device copied `fetches` foreign experts in, will restore `restores` home
  /// experts, and waited `stall_s` for copies.
  void on_expert_fetches(int64_t fetches, int64_t restores, double stall_s) {
    expert_fetches_ += fetches;
    expert_restores_ += restores;
    fetch_stall_s_ += stall_s;
  }
  /// A barrier all-to-all (dispatch when `dispatch`, else combine) delivered `rows` token
  /// rows, `remote` of them from another device.
  void on_all_to_all_rows(bool dispatch, int64_t remote, int64_t rows) {
    (dispatch ? dispatch_rows_ : combine_rows_) += rows;
    (dispatch ? dispatch_remote_ : combine_remote_) += remote;
  }
  /// Summary over everything recorded. `wall_s` > 0 is the duration rates and busy
  /// percentages are taken over; otherwise the span from the first arrival to the last
  /// recorded event is used.
  RunMetrics summarize(double wall_s) const;

  int64_t num_devices() const { return num_devices_; }

  /// Bounds what a long-lived engine's recorder holds (ServingEngine calls it every few
  /// hundred finished requests). Folds into running totals: finished and cancelled requests
  /// (their TTFT and ITL into LatencySamples of `latency_capacity`), every busy interval
  /// (into busy seconds per device; intervals reported later are clipped to begin after the
  /// folded ones, which is exact while a device runs one stage at a time, as the device actor
  /// does), and the MoE samples of iterations more than kMoeFoldLag behind the newest (into
  /// balance sums and per-block totals; a sample of such an iteration reported after it was
  /// folded counts as a sample of its own). Summaries stay exact — counts, tokens, means,
  /// busy %, expert tokens — except that percentiles become those of a uniform sample once
  /// more than `latency_capacity` values were folded, and the load_* fields, which need every
  /// request's times, stay 0 after the first compaction.
  void compact();
  static constexpr int64_t kMoeFoldLag = 64;
  /// [block][device]: expert tokens recorded per MoE block and device, summed over iterations
  /// (blocks never recorded are empty rows).
  std::vector<std::vector<int64_t>> moe_tokens_by_block() const;

 private:
  struct RequestTimes {
    double arrival_s = 0.0;
    double finish_s = -1.0;          ///< < 0 while running
    std::vector<double> token_s;     ///< time of each output token
    bool cancelled = false;
  };
  RequestTimes& request(int64_t request_id);
  /// Fills m's load_* fields from the requests' times; reads m.duration_s.
  static void summarize_load_window(const std::map<int64_t, RequestTimes>& requests, RunMetrics& m);

  int64_t num_devices_;
  std::map<int64_t, RequestTimes> requests_;
  /// [device] (begin, end); an interval starting inside the previous one is merged into it.
  std::vector<std::vector<std::pair<double, double>>> busy_;
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> moe_tokens_;  ///< (block, it)
  std::map<std::pair<int64_t, int64_t>, double> layer_start_s_;  ///< (block, it) → start
  LatencySamples layer_s_;          ///< per completed layer: its duration
  double idle_fraction_sum_ = 0.0;  ///< Σ over layers and expert devices of idle / duration
  int64_t idle_samples_ = 0;
  int64_t tokens_rebalanced_ = 0, expert_fetches_ = 0, expert_restores_ = 0;
  int64_t dispatch_rows_ = 0, dispatch_remote_ = 0, combine_rows_ = 0, combine_remote_ = 0;
  double fetch_stall_s_ = 0.0;
  double first_s_ = 0.0, last_s_ = 0.0;
  bool any_event_ = false;
  // Folded by compact():
  bool compacted_ = false;
  int64_t folded_requests_ = 0, folded_completed_ = 0, folded_tokens_ = 0;
  LatencySamples ttft_folded_, itl_folded_;
  std::vector<double> busy_folded_s_;      ///< [device] busy seconds folded
  std::vector<double> busy_folded_until_;  ///< [device] end of the last folded interval
  double moe_balance_folded_ = 0.0;        ///< Σ mean/max over folded MoE samples
  int64_t moe_samples_folded_ = 0;
  std::vector<std::vector<int64_t>> moe_block_folded_;  ///< [block][device] folded tokens
  int64_t max_moe_iteration_ = -1;
  int64_t rejected_ = 0;
};

/// A readable multi-line table for a terminal (ms, tokens/s, %); device_names gives the row
/// labels of the busy column (missing names print as "dev<i>").
std::string format_metrics_table(const RunMetrics& metrics,
                                 const std::vector<std::string>& device_names);

/// JSON object with every RunMetrics field (latencies as {"num_samples","mean_ms","p50_ms",
/// "p99_ms"}, null when nothing was measured; moe_balance null when num_moe_samples is 0).
nlohmann::json to_json(const RunMetrics& metrics);

}  // namespace muflow::engine::serving
