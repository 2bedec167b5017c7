// `muflow trace view TRACE.json -o REPORT.html [--compare OTHER.json] [--title T]`: analyses
// one or two traces (engine/trace/trace_analysis) and writes one self-contained HTML page: the
// viewer of tools/trace_viewer/ (embedded at build time) with the report model inlined.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/trace/trace_analysis.hpp"
#include "nlohmann/json.hpp"
#include "tools/commands.hpp"
#include "tools/trace_viewer/assets.hpp"

namespace muflow::tools {
namespace {

namespace fs = std::filesystem;

template <size_t N>
std::string join(const std::string_view (&pieces)[N]) {
  std::string out;
  for (std::string_view p : pieces) out.append(p);
  return out;
}

/// Text safe inside HTML element content and attribute values.
std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

/// Rounds every floating-point number to 1e-3 (microseconds to nanoseconds, fractions to
/// 0.1%): the page cannot show more, and short numbers keep a million-event report small.
void round_numbers(nlohmann::json& j) {
  if (j.is_number_float()) {
    const double x = j.get<double>();
    j = std::isfinite(x) ? std::round(x * 1000.0) / 1000.0 : 0.0;
  } else if (j.is_array() || j.is_object()) {
    for (auto& child : j) round_numbers(child);
  }
}

/// JSON text that may sit inside <script type="application/json">: '<' only occurs inside
/// JSON strings, where \u003c means the same, so "</script>" can never end the element.
std::string script_safe_json(const nlohmann::json& j) {
  const std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size() + 64);
  for (char c : text) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out += c;
    }
  }
  return out;
}

/// The viewer template with its @@MUFLOW_*@@ placeholders filled in one pass (inserted text
/// is never searched again, so data cannot inject a placeholder).
std::string fill_template(const std::string& tpl, const std::string& title,
                          const std::string& data) {
  const std::string css = join(trace_viewer::kViewerCss);
  const std::string js = join(trace_viewer::kViewerJs);
  std::string out;
  out.reserve(tpl.size() + css.size() + js.size() + data.size() + 256);
  size_t pos = 0;
  while (true) {
    const size_t at = tpl.find("@@MUFLOW_", pos);
    const size_t end = at == std::string::npos ? at : tpl.find("@@", at + 9);
    if (end == std::string::npos) {
      out.append(tpl, pos, std::string::npos);
      return out;
    }
    out.append(tpl, pos, at - pos);
    const std::string_view key(tpl.data() + at + 9, end - at - 9);
    if (key == "TITLE") {
      out += html_escape(title);
    } else if (key == "CSS") {
      out += css;
    } else if (key == "JS") {
      out += js;
    } else if (key == "DATA") {
      out += data;
    } else {
      out.append(tpl, at, end + 2 - at);  // not ours: leave as written
    }
    pos = end + 2;
  }
}

int fail_trace_view(const std::string& what) { return command_failed("trace view", what); }

}  // namespace

Command add_trace_view_command(CLI::App& app) {
  struct Options {
    std::string trace, output, compare, title;
  };
  auto o = std::make_shared<Options>();
  app.add_option("TRACE", o->trace, "trace JSON written by `muflow run --trace`")->required();
  app.add_option("-o,--output", o->output, "HTML file to write (self-contained)")->required();
  app.add_option("--compare", o->compare, "a second trace, shown side by side with TRACE");
  app.add_option("--title", o->title, "page title (default: from the trace file names)");
  return [o]() {
    std::vector<std::string> paths{o->trace};
    if (!o->compare.empty()) paths.push_back(o->compare);
    nlohmann::json runs = nlohmann::json::array();
    std::vector<int64_t> num_events;
    // Finer overview buckets than the model's default: they are what a zoomed-in timeline
    // shows for devices with too many slices to embed (4,000 x 2 numbers per device).
    engine::trace::AnalysisOptions options;
    options.num_buckets = 4000;
    for (size_t i = 0; i < paths.size(); ++i) {
      const absl::StatusOr<engine::trace::TraceReport> report =
          engine::trace::analyze_trace_file(paths[i], options);
      // The message starts with the file name.
      if (!report.ok()) return fail_trace_view(std::string(report.status().message()));
      num_events.push_back(report->meta.num_events);
      nlohmann::json model = engine::trace::to_report_json(*report);
      round_numbers(model);
      runs.push_back({{"label", std::string(1, static_cast<char>('A' + i))},
                      {"file", paths[i]},
                      {"report", std::move(model)}});
    }
    std::string title = o->title;
    if (title.empty()) {
      title = "muflow trace: " + fs::path(paths[0]).filename().string();
      if (paths.size() > 1) title += " vs " + fs::path(paths[1]).filename().string();
    }
    const nlohmann::json payload = {{"title", title}, {"runs", std::move(runs)}};
    const std::string html =
        fill_template(join(trace_viewer::kViewerHtml), title, script_safe_json(payload));

    const fs::path out(o->output);
    std::error_code ec;
    if (out.has_parent_path()) fs::create_directories(out.parent_path(), ec);
    if (ec) return fail_trace_view(o->output + ": cannot create folder: " + ec.message());
    std::ofstream file(out, std::ios::binary | std::ios::trunc);
    if (!file) return fail_trace_view(o->output + ": cannot write: " + std::strerror(errno));
    file.write(html.data(), static_cast<std::streamsize>(html.size()));
    file.close();
    if (!file) return fail_trace_view(o->output + ": cannot write: " + std::strerror(errno));
    std::printf("wrote %s (%.1f MB", o->output.c_str(), static_cast<double>(html.size()) / 1e6);
    for (size_t i = 0; i < paths.size(); ++i) {
      std::printf("%s%s: %lld events", i ? "; " : ", ", paths[i].c_str(),
                  static_cast<long long>(num_events[i]));
    }
    std::printf(")\n");
    return 0;
  };
}

}  // namespace muflow::tools
