#pragma once
/// \file
/// Analysis of a recorded actor trace (the Chrome Trace Event JSON that `muflow run --trace`
/// writes through TraceRecorder): where each device spent its time, which collectives it
/// waited in, how expert tokens spread over blocks, experts and devices, and how μ-queues
/// filled. The result, TraceReport, is what `muflow trace summary` prints and what the HTML
/// viewer (`muflow trace view`) draws; to_report_json is its JSON model.
///
/// Definitions (times in microseconds, as in the trace):
/// - Analysis window: from t0 = the earliest "ts" to the latest end ("ts" + "dur", or "ts"
///   for instants and counters) over the 'X', 'C' and 'i' events; duration = end - t0.
///   Metadata, flow ('s'/'f') and unknown phases do not move it.
/// - Stage slice: an 'X' event whose "cat" is not "wait"; it belongs to the stage (pid, tid)
///   and the device pid. Wait slice: an 'X' event with cat "wait" (tid 10000, the
///   "collective waits" lane), on the device that waits.
/// - busy (per device) = length of the union of its stage slices.
/// - wait = length of (union of its wait slices) minus busy: time inside a collective wait
///   while running no stage.
/// - idle = duration - busy - wait. busy/wait/idle_pct = 100 * x / duration (0 if the
///   duration is 0), so the three add up to 100.
///
/// Relation to the run's metrics: MetricsRecorder::on_device_busy receives exactly the
/// intervals the stage slices record (stage.cpp sends both), and its busy % is the union of
/// them over RunMetrics::duration_s, which runs from the run's time origin (trace ts 0) to
/// the end of the run, not over the trace's window. Both are kept: busy_pct is over the
/// trace window; run_busy_pct is busy over otherData.metrics.duration_s and equals
/// otherData.metrics.device_busy_pct (recorded_busy_pct) unless the recorder dropped events.
/// The terminal summary prints both when the trace carries the run's metrics.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace muflow::engine::trace {

/// Knobs of analyze_trace. Defaults match the viewer's report model.
struct AnalysisOptions {
  /// Label for meta.source and error messages (analyze_trace_file uses the path when empty).
  std::string source;
  /// A device's raw stage slices go into the report when it has at most this many.
  int64_t max_slices_per_device = 20000;
  int64_t num_buckets = 1000;       ///< overview buckets per device over the window (>= 1)
  int64_t max_gaps = 200;           ///< longest idle gaps kept per device
  int64_t max_queue_points = 2000;  ///< points per queue series after downsampling (>= 1)
};

/// One stage execution, for drawing. ts_us relative to TraceMeta::t0_us.
struct StageSlice {
  double ts_us = 0.0;
  double dur_us = 0.0;
  int64_t stage_id = 0;  ///< StageReport::id
  int64_t tokens = 0;    ///< args.tokens (0 when absent)
};

/// A stretch of time (ts_us relative to t0).
struct TimeSpan {
  double ts_us = 0.0;
  double dur_us = 0.0;
};

struct DeviceReport {
  int64_t pid = 0;        ///< device index
  std::string name;       ///< process_name metadata, else "dev<pid>"
  double busy_us = 0.0, wait_us = 0.0, idle_us = 0.0;
  double busy_pct = 0.0, wait_pct = 0.0, idle_pct = 0.0;  ///< of TraceMeta::duration_us
  /// busy_us over TraceMeta::run_duration_us (the run's own busy %); nullopt when the trace
  /// carries no run metrics.
  std::optional<double> run_busy_pct;
  /// otherData.metrics.device_busy_pct[pid] as the run recorded it; nullopt when absent.
  std::optional<double> recorded_busy_pct;
  int64_t num_slices = 0;            ///< stage slices of this device
  bool slices_included = false;      ///< num_slices <= max_slices_per_device
  std::vector<StageSlice> slices;    ///< by ts; empty unless slices_included
  double bucket_us = 0.0;            ///< duration / num_buckets (0 for an empty trace)
  std::vector<double> bucket_busy;   ///< [num_buckets] busy fraction 0..1 of each bucket
  std::vector<double> bucket_wait;   ///< [num_buckets] wait (not busy) fraction 0..1
  std::vector<TimeSpan> gaps;        ///< longest idle gaps, longest first (ties: earlier)
};

enum class TraceStageKind { kAttention, kExpert, kSampler, kOther };

/// "attn", "expert", "sampler" or "other".
const char* trace_stage_kind_name(TraceStageKind kind);

/// A stage actor: a (pid, tid) thread that is not a wait lane.
struct StageReport {
  int64_t id = 0;        ///< position in TraceReport::stages (sorted by pid, then tid)
  int64_t pid = 0, tid = 0;
  std::string name;      ///< thread_name metadata, else the name of its first slice
  TraceStageKind kind = TraceStageKind::kOther;  ///< from the name's first word
  int64_t block = -1;    ///< "b{N}" in the name, -1 when absent
  int64_t index = -1;    ///< expert "e{N}" or rank "r{N}" in the name, -1 when absent
  double busy_us = 0.0;  ///< sum of its slices' durations
  int64_t runs = 0;      ///< number of slices
  int64_t tokens = 0;    ///< sum of args.tokens
};

/// The ready depth of one μ-queue over time (counters "queue {stage name}").
struct QueueReport {
  int64_t stage_id = -1;  ///< the stage of that name on the same pid, -1 when none
  int64_t pid = 0;
  std::string name;       ///< the stage name (counter name without "queue ")
  double max = 0.0;       ///< largest depth recorded
  /// (ts relative to t0, depth), by time. When there were more than max_queue_points
  /// samples, the window is cut into max_queue_points equal buckets and each non-empty
  /// bucket keeps its largest sample (the earliest of equal ones).
  std::vector<std::pair<double, double>> series;
};

/// Expert tokens (token-expert pairs, args.tokens of "expert b{B} e{E}" slices).
struct ExpertHeatmap {
  int64_t num_blocks = 0;   ///< max(otherData.num_layers, largest block + 1)
  int64_t num_experts = 0;  ///< max(otherData.num_experts, largest expert + 1)
  int64_t num_devices = 0;  ///< TraceReport::devices.size()
  std::vector<std::vector<int64_t>> expert_tokens;  ///< [num_blocks][num_experts]
  /// [num_blocks][num_devices], column d = TraceReport::devices[d] (the slice's pid).
  std::vector<std::vector<int64_t>> device_tokens;
};

/// Load balance of one block over the whole trace: mean / max of its device_tokens row over
/// all devices (1 = even). Only blocks with expert tokens are listed. Unlike
/// RunMetrics::moe_balance (a mean over (block, iteration) samples), this is the balance of
/// the block's totals.
struct BlockBalance {
  int64_t block = 0;
  double mean_over_max = 0.0;
};

/// Time spent in one kind of collective wait (the wait slice's name, "wait dispatch b3"),
/// summed over devices and iterations (sum of durations, overlap with stages included).
struct WaitReason {
  std::string reason;
  double total_us = 0.0;
  int64_t count = 0;
};

struct TraceMeta {
  std::string source, wiring, topology;  ///< otherData.wiring / .topology ("" when absent)
  double t0_us = 0.0;        ///< start of the analysis window (absolute trace time)
  double duration_us = 0.0;  ///< length of the analysis window
  /// otherData.metrics.duration_s * 1e6: the run's duration from its time origin; 0 when
  /// the trace carries no metrics.
  double run_duration_us = 0.0;
  int64_t num_events = 0;          ///< otherData.num_events, else events read (metadata out)
  int64_t num_dropped_events = 0;  ///< otherData.num_dropped_events, else 0
  /// otherData.metrics (the run's RunMetrics as JSON: output tokens/s, TTFT, ITL, ...), or
  /// null when the trace has none.
  nlohmann::json run_metrics;
};

/// Everything analyze_trace finds. Plain data; owned by the caller.
struct TraceReport {
  TraceMeta meta;
  /// By pid: every pid named by metadata or carrying an 'X' or 'C' event, plus
  /// 0..otherData.num_devices-1.
  std::vector<DeviceReport> devices;
  std::vector<StageReport> stages;
  std::vector<QueueReport> queues;    ///< by (pid, name)
  ExpertHeatmap heatmap;
  std::vector<BlockBalance> balance;  ///< by block
  std::vector<WaitReason> waits;      ///< by total_us descending, then reason
};

/// Analyses a parsed trace ({"traceEvents": [...], "otherData": {...}}) in linear passes
/// (plus a sort per device when its slices are out of order). Unknown phases and counters are
/// ignored. Errors (InvalidArgument, prefixed with options.source): the checks of
/// visit_trace_events (no traceEvents array; an event missing ph, ts or pid, naming its
/// index); expert indices so large the heatmap would exceed 2^24 cells.
absl::StatusOr<TraceReport> analyze_trace(const nlohmann::json& trace,
                                          const AnalysisOptions& options);

/// As analyze_trace on the text of a trace file, parsed as a stream (memory: one event at a
/// time plus the report), so million-event traces are fine. Extra error: not valid JSON.
absl::StatusOr<TraceReport> analyze_trace_text(std::string_view text,
                                               const AnalysisOptions& options);

/// Reads `path` and analyses it (analyze_trace_text; meta.source = path unless
/// options.source is set). Extra errors: the file cannot be read (NotFound,
/// PermissionDenied, ... following errno, message "PATH: cannot read: ...").
absl::StatusOr<TraceReport> analyze_trace_file(const std::string& path,
                                               const AnalysisOptions& options);

/// The report model the HTML viewer reads: {"meta", "devices", "stages", "queues",
/// "heatmap", "balance", "waits"} (see engine/README.md, "Trace analysis"). A device's
/// "slices" is null when slices_included is false. Times in microseconds relative to t0;
/// slice, gap and series times are rounded to 1 ns (the trace's resolution). Beyond the
/// viewer's schema, meta.run_duration_us, meta.run_metrics and each device's run_busy_pct
/// carry the run's own duration, metrics and busy % (null when the trace has no
/// otherData.metrics).
nlohmann::json to_report_json(const TraceReport& report);

/// Text for a terminal: the window, per-device busy/wait/idle % (and the run's busy % when
/// known), the `top_n` longest wait reasons, per-block balance, the `top_n` busiest stages.
std::string format_trace_summary(const TraceReport& report, int top_n);

}  // namespace muflow::engine::trace
