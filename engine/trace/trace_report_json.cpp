#include <cmath>

#include "engine/trace/trace_analysis.hpp"

namespace muflow::engine::trace {
namespace {

using json = nlohmann::json;

// Relative times in the report model are rounded to 1 ns (the trace's own resolution), so
// differences like 566.0310000000001 print short.
double ns(double us) { return std::round(us * 1e3) / 1e3; }

json span_pairs(const std::vector<std::pair<double, double>>& series) {
  json out = json::array();
  for (const auto& [a, b] : series) out.push_back({ns(a), b});
  return out;
}

}  // namespace

json to_report_json(const TraceReport& r) {
  json out;
  out["meta"] = {{"source", r.meta.source},
                 {"wiring", r.meta.wiring},
                 {"topology", r.meta.topology},
                 {"t0_us", r.meta.t0_us},
                 {"duration_us", r.meta.duration_us},
                 {"num_events", r.meta.num_events},
                 {"num_dropped_events", r.meta.num_dropped_events}};
  // The run's own duration (otherData.metrics.duration_s), when the trace carries it.
  out["meta"]["run_duration_us"] =
      r.meta.run_duration_us > 0 ? json(r.meta.run_duration_us) : json(nullptr);
  out["meta"]["run_metrics"] = r.meta.run_metrics;
  json devices = json::array();
  for (const DeviceReport& d : r.devices) {
    json slices = nullptr;
    if (d.slices_included) {
      slices = json::array();
      for (const StageSlice& s : d.slices) {
        slices.push_back({ns(s.ts_us), ns(s.dur_us), s.stage_id, s.tokens});
      }
    }
    json gaps = json::array();
    for (const TimeSpan& g : d.gaps) gaps.push_back({ns(g.ts_us), ns(g.dur_us)});
    devices.push_back(
        {{"pid", d.pid},
         {"name", d.name},
         {"busy_us", d.busy_us},
         {"wait_us", d.wait_us},
         {"idle_us", d.idle_us},
         {"busy_pct", d.busy_pct},
         {"wait_pct", d.wait_pct},
         {"idle_pct", d.idle_pct},
         {"slices", std::move(slices)},
         {"buckets",
          {{"bucket_us", d.bucket_us}, {"busy", d.bucket_busy}, {"wait", d.bucket_wait}}},
         {"gaps", std::move(gaps)},
         {"run_busy_pct", d.run_busy_pct ? json(*d.run_busy_pct) : json(nullptr)}});
  }
  out["devices"] = std::move(devices);
  json stages = json::array();
  for (const StageReport& s : r.stages) {
    stages.push_back({{"id", s.id},
                      {"pid", s.pid},
                      {"tid", s.tid},
                      {"name", s.name},
                      {"kind", trace_stage_kind_name(s.kind)},
                      {"block", s.block},
                      {"index", s.index},
                      {"busy_us", s.busy_us},
                      {"runs", s.runs},
                      {"tokens", s.tokens}});
  }
  out["stages"] = std::move(stages);
  json queues = json::array();
  for (const QueueReport& q : r.queues) {
    queues.push_back({{"stage_id", q.stage_id},
                      {"name", q.name},
                      {"max", q.max},
                      {"series", span_pairs(q.series)}});
  }
  out["queues"] = std::move(queues);
  out["heatmap"] = {{"num_blocks", r.heatmap.num_blocks},
                    {"num_experts", r.heatmap.num_experts},
                    {"expert_tokens", r.heatmap.expert_tokens},
                    {"num_devices", r.heatmap.num_devices},
                    {"device_tokens", r.heatmap.device_tokens}};
  json balance = json::array();
  for (const BlockBalance& b : r.balance) {
    balance.push_back({{"block", b.block}, {"mean_over_max", b.mean_over_max}});
  }
  out["balance"] = std::move(balance);
  json waits = json::array();
  for (const WaitReason& w : r.waits) {
    waits.push_back({{"reason", w.reason}, {"total_us", w.total_us}, {"count", w.count}});
  }
  out["waits"] = std::move(waits);
  return out;
}

}  // namespace muflow::engine::trace
