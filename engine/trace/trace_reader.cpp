#include "engine/trace/trace_reader.hpp"

#include <cmath>
#include <utility>

#include "engine/sv_cat.hpp"
#include "engine/trace/trace.hpp"

namespace muflow::engine::trace {
namespace {

using json = nlohmann::json;

absl::Status event_error(const std::string& source, size_t index, std::string_view what) {
  return absl::InvalidArgumentError(sv_cat(source, ": event ", index, ": ", what));
}

std::string_view string_field(const json& event, const char* key) {
  const auto it = event.find(key);
  if (it == event.end() || !it->is_string()) return {};
  return it->get_ref<const std::string&>();
}

// An integer-valued number (integers, or floats with no fraction, as some writers emit).
bool integer_value(const json& v, int64_t* out) {
  if (v.is_number_integer()) {
    *out = v.get<int64_t>();  // unsigned values above 2^63 wrap; still no crash
    return true;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) return false;
    *out = static_cast<int64_t>(d);
    return true;
  }
  return false;
}

// Checks one event and fills `view`; the error names the event index.
absl::Status make_view(const json& event, size_t index, const std::string& source,
                       TraceEventView* view) {
  if (!event.is_object()) return event_error(source, index, "not a JSON object");
  const std::string_view ph = string_field(event, "ph");
  if (ph.empty()) return event_error(source, index, "missing string field 'ph'");
  TraceEventView v;
  v.index = index;
  v.phase = ph.front();
  v.name = string_field(event, "name");
  v.cat = string_field(event, "cat");
  const auto pid = event.find("pid");
  if (pid == event.end()) return event_error(source, index, "missing field 'pid'");
  if (!integer_value(*pid, &v.pid)) {
    return event_error(source, index, "'pid' is not an integer");
  }
  if (const auto tid = event.find("tid"); tid != event.end() && !integer_value(*tid, &v.tid)) {
    return event_error(source, index, "'tid' is not an integer");
  }
  if (v.phase != 'M') {
    const auto ts = event.find("ts");
    if (ts == event.end()) return event_error(source, index, "missing field 'ts'");
    if (!ts->is_number()) return event_error(source, index, "'ts' is not a number");
    v.ts_us = ts->get<double>();
  }
  if (v.phase == 'X') {
    const auto dur = event.find("dur");
    if (dur == event.end() || !dur->is_number()) {
      return event_error(source, index, "complete event ('X') without a numeric 'dur'");
    }
    v.dur_us = dur->get<double>();
    if (v.dur_us < 0) return event_error(source, index, "negative 'dur'");
  }
  if (const auto args = event.find("args"); args != event.end() && args->is_object()) {
    v.args = &*args;
  }
  *view = v;
  return absl::OkStatus();
}

json other_data_of(const json& root) {
  if (root.is_object()) {
    const auto it = root.find("otherData");
    if (it != root.end() && it->is_object()) return *it;
  }
  return json::object();
}

}  // namespace

absl::Status visit_trace_events(const json& trace, const std::string& source,
                                const TraceEventVisitor& visit, json* other_data) {
  const auto events = trace.is_object() ? trace.find("traceEvents") : trace.end();
  if (!trace.is_object() || events == trace.end() || !events->is_array()) {
    return absl::InvalidArgumentError(
        sv_cat(source, ": no 'traceEvents' array (not a Chrome trace JSON object)"));
  }
  *other_data = other_data_of(trace);
  size_t index = 0;
  for (const json& event : *events) {
    TraceEventView view;
    if (absl::Status s = make_view(event, index, source, &view); !s.ok()) return s;
    if (absl::Status s = visit(view); !s.ok()) return s;
    ++index;
  }
  return absl::OkStatus();
}

absl::Status stream_trace_events(std::string_view text, const std::string& source,
                                 const TraceEventVisitor& visit, json* other_data) {
  // nlohmann's callback parser reports depth 1 for the keys and values of the root object
  // and depth 2 for the elements of its arrays; an element of "traceEvents" is handed to the
  // visitor when it is complete and then discarded, so the document keeps no events.
  absl::Status status;
  std::string root_key;       // the root key whose value is being parsed
  bool in_events = false, saw_events = false;
  size_t index = 0;
  const auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    using E = json::parse_event_t;
    if (depth == 1) {
      if (event == E::key) {
        root_key = parsed.is_string() ? parsed.get<std::string>() : std::string();
      } else if (event == E::array_start && root_key == "traceEvents") {
        in_events = saw_events = true;
      } else if (event == E::array_end && in_events) {
        in_events = false;
      }
      return true;
    }
    if (!in_events || depth != 2) return true;
    if (event == E::object_start) return status.ok();  // skip building after an error
    if (event == E::object_end || event == E::value) {
      if (status.ok()) {
        TraceEventView view;
        status = make_view(parsed, index, source, &view);
        if (status.ok()) status = visit(view);
      }
      ++index;
      return false;  // discard the event
    }
    if (event == E::array_start) {  // an array as an event
      if (status.ok()) status = event_error(source, index, "not a JSON object");
      ++index;
      return false;
    }
    return true;
  };
  json root;
  try {
    root = json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    if (!status.ok()) return status;
    return absl::InvalidArgumentError(sv_cat(source, ": not valid JSON: ", e.what()));
  }
  if (!status.ok()) return status;
  if (!saw_events || !root.is_object()) {
    return absl::InvalidArgumentError(
        sv_cat(source, ": no 'traceEvents' array (not a Chrome trace JSON object)"));
  }
  *other_data = other_data_of(root);
  return absl::OkStatus();
}

absl::Status visit_recorded_events(const TraceRecorder& recorder, const std::string& source,
                                   const TraceEventVisitor& visit, json* other_data) {
  *other_data = recorder.other_data();
  size_t index = 0;
  return recorder.visit_events([&](const TraceEvent& e) {
    TraceEventView v;
    v.index = index;
    v.phase = e.phase;
    v.name = e.name;
    v.cat = e.cat;
    v.pid = e.pid;
    v.tid = e.tid;
    if (e.phase != 'M') {
      // What the file would hold: JSON has no NaN or infinity, nlohmann writes them as null.
      if (!std::isfinite(e.ts_us)) return event_error(source, index, "'ts' is not a number");
      v.ts_us = e.ts_us;
    }
    if (e.phase == 'X') {
      if (!std::isfinite(e.dur_us)) {
        return event_error(source, index, "complete event ('X') without a numeric 'dur'");
      }
      v.dur_us = e.dur_us;
    }
    if (e.args.is_object()) v.args = &e.args;
    ++index;
    return visit(v);
  });
}

}  // namespace muflow::engine::trace
