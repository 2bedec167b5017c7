#include <algorithm>
#include <string>

#include "absl/strings/str_format.h"
#include "engine/trace/trace_analysis.hpp"

namespace muflow::engine::trace {

std::string format_trace_summary(const TraceReport& r, int top_n) {
  const size_t top = static_cast<size_t>(std::max(top_n, 0));
  const auto ms = [](double us) { return us / 1e3; };
  std::string out;
  absl::StrAppendFormat(&out, "trace %s\n", r.meta.source.empty() ? "-" : r.meta.source);
  if (!r.meta.wiring.empty() || !r.meta.topology.empty()) {
    absl::StrAppendFormat(&out, "  wiring %s, topology %s\n",
                          r.meta.wiring.empty() ? "-" : r.meta.wiring,
                          r.meta.topology.empty() ? "-" : r.meta.topology);
  }
  absl::StrAppendFormat(&out, "  %d events (%d dropped), window %.3f ms from t0 = %.3f ms\n",
                        r.meta.num_events, r.meta.num_dropped_events, ms(r.meta.duration_us),
                        ms(r.meta.t0_us));
  if (r.meta.num_dropped_events > 0) {
    out += "  warning: the recorder dropped events; everything below undercounts\n";
  }
  const bool run = r.meta.run_duration_us > 0;
  out += "\ndevices (% of the trace window";
  if (run) {
    absl::StrAppendFormat(&out, "; run busy = busy over the run's %.3f ms, as `muflow run` prints",
                          ms(r.meta.run_duration_us));
  }
  out += ")\n";
  absl::StrAppendFormat(&out, "  %-24s %7s %7s %7s%s  %s\n", "device", "busy", "wait", "idle",
                        run ? "  run busy" : "", "longest idle gap");
  for (const DeviceReport& d : r.devices) {
    std::string run_col;
    if (run) run_col = absl::StrFormat("  %7.1f%%", d.run_busy_pct.value_or(0.0));
    const std::string gap =
        d.gaps.empty()
            ? "-"
            : absl::StrFormat("%.3f ms at %.3f ms", ms(d.gaps[0].dur_us), ms(d.gaps[0].ts_us));
    absl::StrAppendFormat(&out, "  %-24s %6.1f%% %6.1f%% %6.1f%%%s  %s\n", d.name, d.busy_pct,
                          d.wait_pct, d.idle_pct, run_col, gap);
  }

  out += "\nwaiting in collectives (sum over devices)\n";
  if (r.waits.empty()) out += "  none recorded\n";
  for (size_t i = 0; i < r.waits.size() && i < top; ++i) {
    const WaitReason& w = r.waits[i];
    absl::StrAppendFormat(&out, "  %-24s %10.3f ms  %6d waits  mean %.3f ms\n", w.reason,
                          ms(w.total_us), w.count,
                          w.count > 0 ? ms(w.total_us) / static_cast<double>(w.count) : 0.0);
  }
  if (r.waits.size() > top) absl::StrAppendFormat(&out, "  ... %d more\n", r.waits.size() - top);

  out += "\nper-block expert balance (mean/max tokens per device, 1.000 = even)\n";
  if (r.balance.empty()) out += "  no expert tokens recorded\n";
  for (const BlockBalance& b : r.balance) {
    int64_t total = 0, max_tokens = 0;
    for (int64_t t : r.heatmap.device_tokens[static_cast<size_t>(b.block)]) {
      total += t;
      max_tokens = std::max(max_tokens, t);
    }
    absl::StrAppendFormat(&out, "  block %-4d %.3f  (%d expert tokens, busiest device %d)\n",
                          b.block, b.mean_over_max, total, max_tokens);
  }

  out += "\nbusiest stages\n";
  std::vector<const StageReport*> stages;
  for (const StageReport& s : r.stages) stages.push_back(&s);
  std::stable_sort(stages.begin(), stages.end(), [](const StageReport* a, const StageReport* b) {
    return a->busy_us > b->busy_us;
  });
  if (stages.empty()) out += "  none recorded\n";
  for (size_t i = 0; i < stages.size() && i < top; ++i) {
    const StageReport& s = *stages[i];
    const double pct = r.meta.duration_us > 0 ? 100.0 * s.busy_us / r.meta.duration_us : 0.0;
    absl::StrAppendFormat(&out, "  %-24s dev %-3d %10.3f ms %6.1f%%  %7d runs  %9d tokens\n",
                          s.name, s.pid, ms(s.busy_us), pct, s.runs, s.tokens);
  }
  return out;
}

}  // namespace muflow::engine::trace
