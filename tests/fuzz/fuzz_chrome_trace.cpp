// Fuzzes the Chrome Trace Event JSON reader behind `muflow trace summary` and `muflow trace
// view` (engine/trace/trace_analysis.hpp): analyze_trace_text, then both outputs of a report
// (the viewer's JSON model and the terminal summary). Small buckets keep runs fast.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/trace/trace_analysis.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace trace = muflow::engine::trace;
  trace::AnalysisOptions options;
  options.source = "fuzz.json";
  options.num_buckets = 16;
  options.max_queue_points = 16;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<trace::TraceReport> report = trace::analyze_trace_text(text, options);
  if (!report.ok()) return 0;
  (void)trace::to_report_json(*report).dump();
  (void)trace::format_trace_summary(*report, 5);
  return 0;
}
