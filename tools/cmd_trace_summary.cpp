// `muflow trace summary`: what a recorded trace says about where each device's time went.
#include <cstdio>
#include <memory>
#include <string>

#include "engine/trace/trace_analysis.hpp"
#include "tools/commands.hpp"

namespace muflow::tools {

Command add_trace_summary_command(CLI::App& app) {
  struct Options {
    std::string trace;
    int top = 10;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  app.add_option("TRACE", o->trace, "trace JSON written by `muflow run --trace`")->required();
  app.add_option("--top", o->top, "how many wait reasons and stages to list")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--json", o->json, "print the report model (JSON) instead of the summary");
  return [o]() {
    const absl::StatusOr<engine::trace::TraceReport> report =
        engine::trace::analyze_trace_file(o->trace, engine::trace::AnalysisOptions{});
    if (!report.ok()) {
      // The message starts with the file name.
      std::fprintf(stderr, "muflow trace summary: %s\n",
                   std::string(report.status().message()).c_str());
      return 1;
    }
    const std::string text = o->json ? engine::trace::to_report_json(*report).dump() + "\n"
                                     : engine::trace::format_trace_summary(*report, o->top);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  };
}

}  // namespace muflow::tools
