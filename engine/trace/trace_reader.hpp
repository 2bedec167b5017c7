#pragma once
/// \file
/// Reading the events of a Chrome Trace Event Format file ("Trace Event Format" document,
/// Google, 2016) one at a time, with the checks every reader of a `muflow run` trace needs.
/// Two sources: an already parsed JSON document, or the text of a file parsed as a stream
/// (each event is built, handed to the visitor and discarded, so memory stays bounded by one
/// event plus `otherData` whatever the number of events). Pure functions; any thread.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"

namespace muflow::engine::trace {

/// The fields of one trace event that analyses read. Views point into the parsed event and
/// are valid only during the visitor call.
struct TraceEventView {
  size_t index = 0;           ///< position in the traceEvents array (0-based)
  char phase = 0;             ///< first character of "ph" ('X', 'C', 'i', 'M', 's', ...)
  std::string_view name;      ///< "name" ("" when absent or not a string)
  std::string_view cat;       ///< "cat" ("" when absent or not a string)
  int64_t pid = 0;            ///< "pid" (required, an integer)
  int64_t tid = 0;            ///< "tid" (0 when absent)
  double ts_us = 0.0;         ///< "ts" in microseconds (required except for 'M' events)
  double dur_us = 0.0;        ///< "dur" in microseconds ('X' only, required there, >= 0)
  const nlohmann::json* args = nullptr;  ///< "args" when it is an object, else nullptr
};

/// Called once per event in file order. A non-OK status stops the reading and is returned.
using TraceEventVisitor = std::function<absl::Status(const TraceEventView&)>;

/// Visits every event of `trace` ({"traceEvents": [...], "otherData": {...}}) and copies
/// `trace["otherData"]` to `*other_data` (an empty object when absent or not an object).
/// Errors (InvalidArgument, message prefixed with `source`, e.g. "t.json: event 12: ..."):
/// `trace` is not an object with a "traceEvents" array; an event is not an object, has no
/// string "ph", no integer "pid", no numeric "ts" (all phases but 'M'), an 'X' event without
/// a numeric "dur" >= 0, or a "tid" that is not an integer. Unknown phases are passed on
/// (their fields checked as above); the visitor may ignore them.
absl::Status visit_trace_events(const nlohmann::json& trace, const std::string& source,
                                const TraceEventVisitor& visit, nlohmann::json* other_data);

/// As visit_trace_events, but parses `text` (the whole file) as a stream: no document of all
/// events is ever built. Extra error: "source: not valid JSON: <parser message with byte
/// offset>" (InvalidArgument).
absl::Status stream_trace_events(std::string_view text, const std::string& source,
                                 const TraceEventVisitor& visit, nlohmann::json* other_data);

class TraceRecorder;

/// As stream_trace_events over the events `recorder` holds now, without writing or parsing
/// JSON: the same views in the same order (`index` included) as reading the file
/// `recorder.write_json()` would write, since that file prints every number so that it reads
/// back exactly; `*other_data` gets that file's otherData. For a process that reads its own
/// run's trace (actors::calibrate: Server::set_keep_trace, RunOutcome::trace). The one check
/// that can fail is the file's: a non-finite `ts` or 'X' `dur` (written as null) is the
/// same InvalidArgument error, prefixed with `source`. Holds the recorder's lock while
/// visiting (TraceRecorder::visit_events): `visit` must not call the recorder.
absl::Status visit_recorded_events(const TraceRecorder& recorder, const std::string& source,
                                   const TraceEventVisitor& visit, nlohmann::json* other_data);

}  // namespace muflow::engine::trace
