#include "engine/trace/trace_analysis.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "engine/sv_cat.hpp"
#include "engine/trace/trace_intervals.hpp"
#include "engine/trace/trace_reader.hpp"

namespace muflow::engine::trace {
namespace {

using namespace trace_intervals;  // the interval pass (trace_intervals.hpp)

using json = nlohmann::json;

constexpr int64_t kMaxDimension = 1 << 16;       // blocks, experts or devices from otherData
constexpr int64_t kMaxHeatmapCells = 1 << 24;

absl::string_view av(std::string_view s) { return absl::string_view(s.data(), s.size()); }


struct RawSlice {
  double begin = 0.0, end = 0.0;
  size_t stage = 0;  // index into Analyzer::stages_
  int64_t tokens = 0;
};

struct DeviceAcc {
  int64_t pid = 0;
  std::string name;
  std::vector<RawSlice> busy;
  std::vector<Interval> wait;
  bool busy_sorted = true, wait_sorted = true;
};

struct StageAcc {
  int64_t pid = 0, tid = 0;
  std::string name;
  bool named_by_metadata = false;
  double busy_us = 0.0;
  int64_t runs = 0, tokens = 0;
};

struct QueueAcc {
  int64_t pid = 0;
  std::string name;
  double max = 0.0;
  std::vector<std::pair<double, double>> samples;  // (absolute ts, depth)
};

struct ParsedName {
  TraceStageKind kind = TraceStageKind::kOther;
  int64_t block = -1, index = -1;
};

// A decimal number of at most 9 digits, else -1.
int64_t small_number(std::string_view digits) {
  if (digits.empty() || digits.size() > 9) return -1;
  int64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

// "attn b0 r1" -> {attn, 0, 1}; "expert b2 e5" -> {expert, 2, 5}; "sampler r0" -> {sampler,
// -1, 0}. Words are separated by single spaces; unknown words are skipped.
ParsedName parse_stage_name(std::string_view name) {
  ParsedName out;
  size_t pos = 0;
  bool first = true;
  while (pos <= name.size()) {
    size_t end = name.find(' ', pos);
    if (end == std::string_view::npos) end = name.size();
    const std::string_view word = name.substr(pos, end - pos);
    if (first) {
      if (word == "attn") out.kind = TraceStageKind::kAttention;
      if (word == "expert") out.kind = TraceStageKind::kExpert;
      if (word == "sampler") out.kind = TraceStageKind::kSampler;
      first = false;
    } else if (word.size() >= 2) {
      const int64_t n = small_number(word.substr(1));
      if (n >= 0 && word[0] == 'b') out.block = n;
      if (n >= 0 && (word[0] == 'e' || word[0] == 'r')) out.index = n;
    }
    pos = end + 1;
  }
  return out;
}

int64_t int_arg(const json* args, const char* key) {
  if (args == nullptr) return 0;
  const auto it = args->find(key);
  if (it == args->end() || !it->is_number()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  const double d = it->get<double>();
  return std::isfinite(d) && std::fabs(d) < 9.0e18 ? static_cast<int64_t>(std::llround(d)) : 0;
}

// args["tokens"] when numeric, else the first numeric value; nullopt when none.
std::optional<double> counter_value(const json* args) {
  if (args == nullptr) return std::nullopt;
  if (const auto it = args->find("tokens"); it != args->end() && it->is_number()) {
    return it->get<double>();
  }
  for (const auto& [key, value] : args->items()) {
    if (value.is_number()) return value.get<double>();
  }
  return std::nullopt;
}

std::optional<int64_t> sane_count(const json& other, const char* key) {
  const auto it = other.find(key);
  if (it == other.end() || !it->is_number_integer()) return std::nullopt;
  const int64_t n = it->get<int64_t>();
  if (n < 0 || n > kMaxDimension) return std::nullopt;
  return n;
}

std::string string_or_dump(const json& other, const char* key) {
  const auto it = other.find(key);
  if (it == other.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    const auto name = it->find("name");
    if (name != it->end() && name->is_string()) return name->get<std::string>();
  }
  return it->dump();
}

class Analyzer {
 public:
  absl::Status visit(const TraceEventView& e) {
    switch (e.phase) {
      case 'M': return metadata(e);
      case 'X': return complete(e);
      case 'C': return counter(e);
      case 'i':
      case 'I':
        ++num_read_events_;
        extend_window(e.ts_us, e.ts_us);
        return absl::OkStatus();
      default:
        ++num_read_events_;
        return absl::OkStatus();  // flows and unknown phases: counted, not analysed
    }
  }

  absl::StatusOr<TraceReport> finish(const json& other, const AnalysisOptions& options);

 private:
  absl::Status metadata(const TraceEventView& e) {
    if (e.args == nullptr) return absl::OkStatus();
    const auto it = e.args->find("name");
    if (it == e.args->end() || !it->is_string()) return absl::OkStatus();
    if (e.name == "process_name") {
      device(e.pid).name = it->get<std::string>();
    } else if (e.name == "thread_name") {
      device(e.pid);
      StageAcc& s = stage(e.pid, e.tid);
      s.name = it->get<std::string>();
      s.named_by_metadata = true;
    }
    return absl::OkStatus();
  }

  absl::Status complete(const TraceEventView& e) {
    ++num_read_events_;
    const double end = e.ts_us + e.dur_us;
    extend_window(e.ts_us, end);
    DeviceAcc& d = device(e.pid);
    if (e.cat == "wait") {
      if (!d.wait.empty() && e.ts_us < d.wait.back().begin) d.wait_sorted = false;
      d.wait.push_back({e.ts_us, end});
      wait_lanes_.insert({e.pid, e.tid});
      auto [it, inserted] = wait_index_.try_emplace(av(e.name), waits_.size());
      if (inserted) waits_.push_back(WaitReason{std::string(e.name), 0.0, 0});
      WaitReason& w = waits_[it->second];
      w.total_us += e.dur_us;
      ++w.count;
      return absl::OkStatus();
    }
    const size_t stage_index = stage_slot(e.pid, e.tid);
    StageAcc& s = stages_[stage_index];
    if (s.name.empty() && !s.named_by_metadata) s.name = std::string(e.name);
    const int64_t tokens = int_arg(e.args, "tokens");
    s.busy_us += e.dur_us;
    ++s.runs;
    s.tokens += tokens;
    if (!d.busy.empty() && e.ts_us < d.busy.back().begin) d.busy_sorted = false;
    d.busy.push_back({e.ts_us, end, stage_index, tokens});
    const ParsedName parsed = parse_stage_name(e.name);
    if (parsed.kind == TraceStageKind::kExpert && parsed.block >= 0 && parsed.index >= 0) {
      expert_tokens_[{parsed.block, parsed.index}] += tokens;
      device_tokens_[{parsed.block, e.pid}] += tokens;
    }
    return absl::OkStatus();
  }

  absl::Status counter(const TraceEventView& e) {
    ++num_read_events_;
    extend_window(e.ts_us, e.ts_us);
    device(e.pid);  // counters are per device
    constexpr std::string_view kPrefix = "queue ";
    if (e.name.substr(0, kPrefix.size()) != kPrefix) return absl::OkStatus();
    const std::optional<double> value = counter_value(e.args);
    if (!value) return absl::OkStatus();
    const std::string_view stage_name = e.name.substr(kPrefix.size());
    auto& by_name = queue_index_[e.pid];
    auto [it, inserted] = by_name.try_emplace(av(stage_name), queues_.size());
    if (inserted) queues_.push_back(QueueAcc{e.pid, std::string(stage_name), *value, {}});
    QueueAcc& q = queues_[it->second];
    q.max = std::max(q.max, *value);
    q.samples.emplace_back(e.ts_us, *value);
    return absl::OkStatus();
  }

  void extend_window(double begin, double end) {
    t_min_ = std::min(t_min_, begin);
    t_max_ = std::max(t_max_, end);
  }

  DeviceAcc& device(int64_t pid) {
    if (pid == last_pid_) return devices_[last_device_];
    auto [it, inserted] = device_index_.try_emplace(pid, devices_.size());
    if (inserted) devices_.push_back(DeviceAcc{pid, "", {}, {}, true, true});
    last_pid_ = pid;
    last_device_ = it->second;
    return devices_[it->second];
  }

  size_t stage_slot(int64_t pid, int64_t tid) {
    auto [it, inserted] = stage_index_.try_emplace(std::make_pair(pid, tid), stages_.size());
    if (inserted) stages_.push_back(StageAcc{pid, tid, "", false, 0.0, 0, 0});
    return it->second;
  }
  StageAcc& stage(int64_t pid, int64_t tid) { return stages_[stage_slot(pid, tid)]; }

  DeviceReport device_report(DeviceAcc& d, const std::vector<int64_t>& stage_ids,
                             const TraceMeta& meta, const AnalysisOptions& options) const;

  std::vector<DeviceAcc> devices_;
  absl::flat_hash_map<int64_t, size_t> device_index_;
  int64_t last_pid_ = std::numeric_limits<int64_t>::min();
  size_t last_device_ = 0;
  std::vector<StageAcc> stages_;
  absl::flat_hash_map<std::pair<int64_t, int64_t>, size_t> stage_index_;
  absl::flat_hash_set<std::pair<int64_t, int64_t>> wait_lanes_;
  std::vector<QueueAcc> queues_;
  absl::flat_hash_map<int64_t, absl::flat_hash_map<std::string, size_t>> queue_index_;
  std::vector<WaitReason> waits_;
  absl::flat_hash_map<std::string, size_t> wait_index_;
  absl::flat_hash_map<std::pair<int64_t, int64_t>, int64_t> expert_tokens_;  // (block, expert)
  absl::flat_hash_map<std::pair<int64_t, int64_t>, int64_t> device_tokens_;  // (block, pid)
  double t_min_ = std::numeric_limits<double>::infinity();
  double t_max_ = -std::numeric_limits<double>::infinity();
  int64_t num_read_events_ = 0;
};

DeviceReport Analyzer::device_report(DeviceAcc& d, const std::vector<int64_t>& stage_ids,
                                     const TraceMeta& meta,
                                     const AnalysisOptions& options) const {
  DeviceReport r;
  r.pid = d.pid;
  r.name = d.name.empty() ? absl::StrFormat("dev%d", d.pid) : d.name;
  if (!d.busy_sorted) {
    std::stable_sort(d.busy.begin(), d.busy.end(), [](const RawSlice& x, const RawSlice& y) {
      return x.begin < y.begin;
    });
  }
  if (!d.wait_sorted) std::sort(d.wait.begin(), d.wait.end());
  std::vector<Interval> busy_raw;
  busy_raw.reserve(d.busy.size());
  for (const RawSlice& s : d.busy) busy_raw.push_back({s.begin, s.end});
  // Equal begins may be out of order by end after the stable sort; merge_sorted only needs
  // begins ascending.
  const std::vector<Interval> busy = merge_sorted(busy_raw);
  const std::vector<Interval> wait = subtract(merge_sorted(d.wait), busy);
  const double duration = meta.duration_us;
  r.busy_us = total_length(busy);
  r.wait_us = total_length(wait);
  r.idle_us = std::max(0.0, duration - r.busy_us - r.wait_us);
  if (duration > 0) {
    r.busy_pct = 100.0 * r.busy_us / duration;
    r.wait_pct = 100.0 * r.wait_us / duration;
    r.idle_pct = 100.0 * r.idle_us / duration;
  }
  if (meta.run_duration_us > 0) r.run_busy_pct = 100.0 * r.busy_us / meta.run_duration_us;

  r.num_slices = static_cast<int64_t>(d.busy.size());
  r.slices_included = r.num_slices <= options.max_slices_per_device;
  if (r.slices_included) {
    r.slices.reserve(d.busy.size());
    for (const RawSlice& s : d.busy) {
      r.slices.push_back({s.begin - meta.t0_us, s.end - s.begin, stage_ids[s.stage], s.tokens});
    }
  }
  const int64_t num_buckets = duration > 0 ? std::max<int64_t>(options.num_buckets, 1) : 0;
  if (num_buckets > 0) {
    r.bucket_us = duration / static_cast<double>(num_buckets);
    std::vector<double> b(static_cast<size_t>(num_buckets), 0.0), w = b;
    add_coverage(busy, meta.t0_us, r.bucket_us, &b);
    add_coverage(wait, meta.t0_us, r.bucket_us, &w);
    r.bucket_busy = fractions(std::move(b), r.bucket_us);
    r.bucket_wait = fractions(std::move(w), r.bucket_us);
  }
  r.gaps = longest_gaps(busy, wait, meta.t0_us, meta.t0_us + duration, options.max_gaps);
  d.busy = {};  // release memory early
  d.wait = {};
  return r;
}

absl::StatusOr<TraceReport> Analyzer::finish(const json& other, const AnalysisOptions& options) {
  TraceReport report;
  TraceMeta& meta = report.meta;
  meta.source = options.source;
  meta.wiring = string_or_dump(other, "wiring");
  meta.topology = string_or_dump(other, "topology");
  if (t_min_ <= t_max_) {
    meta.t0_us = t_min_;
    meta.duration_us = t_max_ - t_min_;
  }
  meta.num_events = num_read_events_;
  if (const auto it = other.find("num_events"); it != other.end() && it->is_number_integer()) {
    meta.num_events = it->get<int64_t>();
  }
  if (const auto it = other.find("num_dropped_events");
      it != other.end() && it->is_number_integer()) {
    meta.num_dropped_events = it->get<int64_t>();
  }
  const json* metrics = nullptr;
  if (const auto it = other.find("metrics"); it != other.end() && it->is_object()) {
    metrics = &*it;
    meta.run_metrics = *it;
    const auto d = it->find("duration_s");
    if (d != it->end() && d->is_number() && d->get<double>() > 0) {
      meta.run_duration_us = d->get<double>() * 1e6;
    }
  }
  if (const auto n = sane_count(other, "num_devices")) {
    for (int64_t pid = 0; pid < *n; ++pid) device(pid);
  }

  // Stages: every (pid, tid) with a stage slice or a thread name, except the wait lanes.
  std::vector<size_t> order;
  for (size_t i = 0; i < stages_.size(); ++i) {
    const StageAcc& s = stages_[i];
    const bool wait_lane = s.runs == 0 && (s.name == "collective waits" ||
                                           wait_lanes_.contains({s.pid, s.tid}));
    if (!wait_lane) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(stages_[a].pid, stages_[a].tid) < std::tie(stages_[b].pid, stages_[b].tid);
  });
  std::vector<int64_t> stage_ids(stages_.size(), -1);
  for (size_t k = 0; k < order.size(); ++k) {
    const StageAcc& s = stages_[order[k]];
    stage_ids[order[k]] = static_cast<int64_t>(k);
    const ParsedName parsed = parse_stage_name(s.name);
    report.stages.push_back(StageReport{static_cast<int64_t>(k), s.pid, s.tid, s.name,
                                        parsed.kind, parsed.block, parsed.index, s.busy_us,
                                        s.runs, s.tokens});
  }

  // Devices by pid.
  std::vector<size_t> device_order(devices_.size());
  for (size_t i = 0; i < devices_.size(); ++i) device_order[i] = i;
  std::sort(device_order.begin(), device_order.end(),
            [&](size_t a, size_t b) { return devices_[a].pid < devices_[b].pid; });
  absl::flat_hash_map<int64_t, int64_t> column_of_pid;
  const json* recorded = nullptr;
  if (metrics != nullptr) {
    const auto it = metrics->find("device_busy_pct");
    if (it != metrics->end() && it->is_array()) recorded = &*it;
  }
  for (size_t i : device_order) {
    DeviceReport r = device_report(devices_[i], stage_ids, meta, options);
    if (recorded != nullptr && r.pid >= 0 && r.pid < static_cast<int64_t>(recorded->size()) &&
        (*recorded)[static_cast<size_t>(r.pid)].is_number()) {
      r.recorded_busy_pct = (*recorded)[static_cast<size_t>(r.pid)].get<double>();
    }
    column_of_pid[r.pid] = static_cast<int64_t>(report.devices.size());
    report.devices.push_back(std::move(r));
  }

  // Queues by (pid, name).
  absl::flat_hash_map<std::pair<int64_t, std::string>, int64_t> stage_by_name;
  for (const StageReport& s : report.stages) stage_by_name.try_emplace({s.pid, s.name}, s.id);
  std::vector<size_t> queue_order(queues_.size());
  for (size_t i = 0; i < queues_.size(); ++i) queue_order[i] = i;
  std::sort(queue_order.begin(), queue_order.end(), [&](size_t a, size_t b) {
    return std::tie(queues_[a].pid, queues_[a].name) < std::tie(queues_[b].pid, queues_[b].name);
  });
  for (size_t i : queue_order) {
    QueueAcc& q = queues_[i];
    QueueReport r;
    const auto it = stage_by_name.find(std::make_pair(q.pid, q.name));
    r.stage_id = it == stage_by_name.end() ? -1 : it->second;
    r.pid = q.pid;
    r.name = q.name;
    r.max = q.max;
    r.series = downsample_max(std::move(q.samples), meta.t0_us, meta.duration_us,
                              options.max_queue_points);
    report.queues.push_back(std::move(r));
  }

  // Heatmap and balance.
  ExpertHeatmap& h = report.heatmap;
  h.num_blocks = sane_count(other, "num_layers").value_or(0);
  h.num_experts = sane_count(other, "num_experts").value_or(0);
  h.num_devices = static_cast<int64_t>(report.devices.size());
  for (const auto& [key, tokens] : expert_tokens_) {
    h.num_blocks = std::max(h.num_blocks, key.first + 1);
    h.num_experts = std::max(h.num_experts, key.second + 1);
  }
  if (h.num_blocks * std::max(h.num_experts, h.num_devices) > kMaxHeatmapCells) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: expert heatmap too large (%d blocks x %d experts, %d devices); expert slice names "
        "should be 'expert b{block} e{expert}' with small indices",
        options.source, h.num_blocks, h.num_experts, h.num_devices));
  }
  h.expert_tokens.assign(static_cast<size_t>(h.num_blocks),
                         std::vector<int64_t>(static_cast<size_t>(h.num_experts), 0));
  h.device_tokens.assign(static_cast<size_t>(h.num_blocks),
                         std::vector<int64_t>(static_cast<size_t>(h.num_devices), 0));
  for (const auto& [key, tokens] : expert_tokens_) {
    h.expert_tokens[static_cast<size_t>(key.first)][static_cast<size_t>(key.second)] += tokens;
  }
  for (const auto& [key, tokens] : device_tokens_) {
    h.device_tokens[static_cast<size_t>(key.first)]
                   [static_cast<size_t>(column_of_pid.at(key.second))] += tokens;
  }
  for (int64_t b = 0; b < h.num_blocks; ++b) {
    const auto& row = h.device_tokens[static_cast<size_t>(b)];
    if (row.empty()) continue;
    const int64_t max_tokens = *std::max_element(row.begin(), row.end());
    if (max_tokens <= 0) continue;
    double sum = 0.0;
    for (int64_t t : row) sum += static_cast<double>(t);
    report.balance.push_back(
        {b, sum / static_cast<double>(row.size()) / static_cast<double>(max_tokens)});
  }

  report.waits = std::move(waits_);
  std::sort(report.waits.begin(), report.waits.end(),
            [](const WaitReason& a, const WaitReason& b) {
              return a.total_us != b.total_us ? a.total_us > b.total_us : a.reason < b.reason;
            });
  return report;
}

}  // namespace

const char* trace_stage_kind_name(TraceStageKind kind) {
  switch (kind) {
    case TraceStageKind::kAttention: return "attn";
    case TraceStageKind::kExpert: return "expert";
    case TraceStageKind::kSampler: return "sampler";
    case TraceStageKind::kOther: return "other";
  }
  return "other";
}

absl::StatusOr<TraceReport> analyze_trace(const json& trace, const AnalysisOptions& options) {
  Analyzer analyzer;
  json other;
  absl::Status s = visit_trace_events(
      trace, options.source, [&](const TraceEventView& e) { return analyzer.visit(e); }, &other);
  if (!s.ok()) return s;
  return analyzer.finish(other, options);
}

absl::StatusOr<TraceReport> analyze_trace_text(std::string_view text,
                                               const AnalysisOptions& options) {
  Analyzer analyzer;
  json other;
  absl::Status s = stream_trace_events(
      text, options.source, [&](const TraceEventView& e) { return analyzer.visit(e); }, &other);
  if (!s.ok()) return s;
  return analyzer.finish(other, options);
}

absl::StatusOr<TraceReport> analyze_trace_file(const std::string& path,
                                               const AnalysisOptions& options) {
  AnalysisOptions opts = options;
  if (opts.source.empty()) opts.source = path;
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    // ErrnoToStatus appends ": <strerror>".
    if (err != 0) return absl::ErrnoToStatus(err, sv_cat(path, ": cannot read"));
    return absl::NotFoundError(sv_cat(path, ": cannot read"));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(sv_cat(path, ": cannot read: I/O error"));
  }
  const std::string text = std::move(buffer).str();
  return analyze_trace_text(text, opts);
}

}  // namespace muflow::engine::trace
