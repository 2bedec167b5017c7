#pragma once
/// \file
/// Recorder for the Chrome Trace Event Format (the JSON that chrome://tracing and Perfetto
/// open; "Trace Event Format" document, Google, 2016): one process per device (pid = device
/// index), one thread per stage actor (tid = stage actor id), a complete slice per stage
/// execution.

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"

namespace muflow::engine::trace {

/// Scope of an instant event ("s" field): thread, process or global.
enum class InstantScope { kThread, kProcess, kGlobal };

/// One recorded event (complete "X", instant "i" or counter "C"). Times in microseconds.
struct TraceEvent {
  std::string name;
  char phase = 'X';          ///< 'X' complete, 'i' instant, 'C' counter
  int64_t pid = 0;           ///< device index
  int64_t tid = 0;           ///< stage actor id (0 for counters)
  double ts_us = 0.0;        ///< start, microseconds since the run's time origin
  double dur_us = 0.0;       ///< 'X' only
  InstantScope scope = InstantScope::kThread;  ///< 'i' only
  nlohmann::json args;       ///< object or null
  std::string cat;           ///< category ("wait", "batch", ...); empty = none
  uint64_t flow_id = 0;      ///< 's' / 'f' flow events only
};

/// Collects trace events from many threads and writes them as one JSON file.
///
/// Thread-safe: every method locks one mutex, so device threads and actors may record
/// concurrently. Holds at most `max_events` events (complete, instant and counter events
/// together; metadata names do not count): later ones are counted as dropped, never
/// stored, and the count is written to otherData.num_dropped_events, with a sentence in
/// otherData.warning (dropped_warning()) saying how many and how to keep them. Output is
/// deterministic for a given set of events whatever order threads recorded them in.
class TraceRecorder {
 public:
  /// `max_events` >= 0: how many events to keep (0 keeps none, counting all as dropped).
  explicit TraceRecorder(int64_t max_events = 1'000'000);

  /// A complete slice ('X'): `name` ran on device `pid`, stage `tid`, from `ts_us` for
  /// `dur_us` microseconds (>= 0; negative is clamped to 0). `args`: a JSON object or null.
  void complete(std::string name, int64_t pid, int64_t tid, double ts_us, double dur_us,
                nlohmann::json args = nullptr);
  /// An instant event ('i') at `ts_us`.
  void instant(std::string name, int64_t pid, int64_t tid, double ts_us,
               InstantScope scope = InstantScope::kThread, nlohmann::json args = nullptr);
  /// A counter sample ('C') of process `pid` at `ts_us`: `values` is an object of numbers,
  /// e.g. {"queued_tokens": 12}.
  void counter(std::string name, int64_t pid, double ts_us, nlohmann::json values);

  /// A complete ('X') slice with a category, e.g. "wait" for time spent in a collective.
  void complete_in(std::string cat, std::string name, int64_t pid, int64_t tid, double ts_us,
                   double dur_us, nlohmann::json args = nullptr);

  /// A flow arrow between two slices (Chrome 's' start / 'f' finish with binding point "e"),
  /// e.g. a token batch crossing devices. `id` pairs the two ends; both use `cat` and `name`.
  void flow(char phase, std::string cat, std::string name, uint64_t id, int64_t pid, int64_t tid,
            double ts_us);
  /// Metadata ('M' process_name): label of process `pid` ("cpu0"). Last call wins.
  void set_process_name(int64_t pid, std::string name);
  /// Metadata ('M' thread_name): label of thread `tid` of `pid` ("expert b0 e3"). Last wins.
  void set_thread_name(int64_t pid, int64_t tid, std::string name);
  /// Extra key in the file's "otherData" object (e.g. topology, wiring). Last call wins.
  void set_other_data(const std::string& key, nlohmann::json value);

  /// Events stored so far (excluding metadata).
  int64_t num_events() const;
  /// Events refused because max_events was reached.
  int64_t num_dropped() const;
  /// The cap given at construction (clamped to >= 0).
  int64_t max_events() const { return max_events_; }
  /// Empty when nothing was dropped; else one sentence for a user: how many events of how
  /// many were dropped (%), from which time on (the earliest `ts` among the dropped, in s),
  /// the cap, and how to keep them (a larger max_events: `muflow run --trace-max-events N`,
  /// each kept event costs a few hundred bytes of memory until the trace is written; or a
  /// shorter run). Written to otherData.warning by to_json() and write_json().
  std::string dropped_warning() const;

  /// The whole trace: {"traceEvents": [metadata..., events sorted by (ts, pid, tid, name,
  /// phase, dur, args)], "displayTimeUnit": "ms", "otherData": {..., "max_events",
  /// "num_events", "num_dropped_events", and "warning" when events were dropped}}. Metadata events come first, by pid then tid.
  nlohmann::json to_json() const;

  /// Writes to_json() to `path`, one event per line, creating parent folders. Errors name
  /// the path: the folder cannot be created or the file cannot be written (the absl code
  /// follows errno, e.g. PermissionDenied).
  absl::Status write_json(const std::string& path) const;

  /// Calls `visit` once per event, in the order write_json() writes them: the metadata first
  /// ('M' "process_name" by pid, then "thread_name" by pid and tid, args {"name": label}),
  /// then the stored events sorted as to_json() sorts them. For a reader of this process's own
  /// trace that would otherwise write it and parse it back (engine/trace/trace_reader.hpp:
  /// visit_recorded_events). Holds the recorder's lock throughout: `visit` must not call this
  /// recorder. Returns the first non-OK status `visit` returns, which stops the visit.
  absl::Status visit_events(const std::function<absl::Status(const TraceEvent&)>& visit) const;
  /// The "otherData" object to_json() and write_json() write: set_other_data()'s keys, the
  /// event counts, and the drop warning when events were dropped.
  nlohmann::json other_data() const;

 private:
  mutable std::mutex mutex_;
  int64_t max_events_;
  int64_t num_dropped_ = 0;
  double first_dropped_ts_us_ = 0.0;  ///< earliest ts among the dropped events
  std::vector<TraceEvent> events_;
  std::map<int64_t, std::string> process_names_;
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names_;
  nlohmann::json other_data_ = nlohmann::json::object();

  void add(TraceEvent event);  // requires mutex_ not held
  std::string dropped_warning_locked() const;  // requires mutex_ held
  nlohmann::json other_data_locked() const;    // requires mutex_ held
  std::vector<const TraceEvent*> sorted_locked() const;  // requires mutex_ held; event_less
};

}  // namespace muflow::engine::trace
