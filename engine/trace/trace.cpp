#include "engine/trace/trace.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "engine/sv_cat.hpp"

namespace muflow::engine::trace {
namespace {

const char* scope_code(InstantScope scope) {
  switch (scope) {
    case InstantScope::kThread: return "t";
    case InstantScope::kProcess: return "p";
    case InstantScope::kGlobal: return "g";
  }
  return "t";
}

nlohmann::json event_json(const TraceEvent& e) {
  nlohmann::json j = {{"name", e.name},
                      {"ph", std::string(1, e.phase)},
                      {"pid", e.pid},
                      {"tid", e.tid},
                      {"ts", e.ts_us}};
  if (e.phase == 'X') j["dur"] = e.dur_us;
  if (!e.cat.empty()) j["cat"] = e.cat;
  if (e.phase == 's' || e.phase == 'f') j["id"] = e.flow_id;
  if (e.phase == 'f') j["bp"] = "e";
  if (e.phase == 'i') j["s"] = scope_code(e.scope);
  if (!e.args.is_null()) j["args"] = e.args;
  return j;
}

nlohmann::json metadata_json(const char* kind, int64_t pid, int64_t tid,
                             const std::string& name) {
  return {{"name", kind},
          {"ph", "M"},
          {"pid", pid},
          {"tid", tid},
          {"args", {{"name", name}}}};
}

// An I/O error with `message`; the code follows errno when one is set, and then
// ErrnoToStatus appends ": <strerror>" (so `message` must not carry it too).
absl::Status io_error(int err, const std::string& message) {
  if (err == 0) return absl::InternalError(message);
  return absl::ErrnoToStatus(err, message);
}

bool event_less(const TraceEvent& a, const TraceEvent& b) {
  const auto key = [](const TraceEvent& e) {
    return std::tie(e.ts_us, e.pid, e.tid, e.name, e.phase, e.dur_us, e.cat, e.flow_id);
  };
  if (key(a) != key(b)) return key(a) < key(b);
  return a.args.dump() < b.args.dump();  // full tie: order by content, not by arrival
}

}  // namespace

TraceRecorder::TraceRecorder(int64_t max_events) : max_events_(std::max<int64_t>(max_events, 0)) {}

void TraceRecorder::add(TraceEvent event) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (static_cast<int64_t>(events_.size()) >= max_events_) {
    if (num_dropped_ == 0 || event.ts_us < first_dropped_ts_us_) first_dropped_ts_us_ = event.ts_us;
    ++num_dropped_;
    return;
  }
  events_.push_back(std::move(event));
}

void TraceRecorder::complete(std::string name, int64_t pid, int64_t tid, double ts_us,
                             double dur_us, nlohmann::json args) {
  complete_in("", std::move(name), pid, tid, ts_us, dur_us, std::move(args));
}

void TraceRecorder::instant(std::string name, int64_t pid, int64_t tid, double ts_us,
                            InstantScope scope, nlohmann::json args) {
  TraceEvent e;
  e.name = std::move(name);
  e.phase = 'i';
  e.pid = pid;
  e.tid = tid;
  e.ts_us = ts_us;
  e.scope = scope;
  e.args = std::move(args);
  add(std::move(e));
}

void TraceRecorder::counter(std::string name, int64_t pid, double ts_us, nlohmann::json values) {
  TraceEvent e;
  e.name = std::move(name);
  e.phase = 'C';
  e.pid = pid;
  e.ts_us = ts_us;
  e.args = std::move(values);
  add(std::move(e));
}

void TraceRecorder::complete_in(std::string cat, std::string name, int64_t pid, int64_t tid,
                                double ts_us, double dur_us, nlohmann::json args) {
  TraceEvent e;
  e.name = std::move(name);
  e.cat = std::move(cat);
  e.phase = 'X';
  e.pid = pid;
  e.tid = tid;
  e.ts_us = ts_us;
  e.dur_us = std::max(dur_us, 0.0);
  e.args = std::move(args);
  add(std::move(e));
}

void TraceRecorder::flow(char phase, std::string cat, std::string name, uint64_t id, int64_t pid,
                         int64_t tid, double ts_us) {
  TraceEvent e;
  e.name = std::move(name);
  e.cat = std::move(cat);
  e.phase = phase;
  e.flow_id = id;
  e.pid = pid;
  e.tid = tid;
  e.ts_us = ts_us;
  add(std::move(e));
}

void TraceRecorder::set_process_name(int64_t pid, std::string name) {
  std::lock_guard<std::mutex> lock(mutex_);
  process_names_[pid] = std::move(name);
}

void TraceRecorder::set_thread_name(int64_t pid, int64_t tid, std::string name) {
  std::lock_guard<std::mutex> lock(mutex_);
  thread_names_[{pid, tid}] = std::move(name);
}

void TraceRecorder::set_other_data(const std::string& key, nlohmann::json value) {
  std::lock_guard<std::mutex> lock(mutex_);
  other_data_[key] = std::move(value);
}

int64_t TraceRecorder::num_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(events_.size());
}

int64_t TraceRecorder::num_dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_dropped_;
}

std::string TraceRecorder::dropped_warning() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_warning_locked();
}

std::string TraceRecorder::dropped_warning_locked() const {
  if (num_dropped_ == 0) return {};
  const int64_t total = num_dropped_ + static_cast<int64_t>(events_.size());
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.1f", 100.0 * static_cast<double>(num_dropped_) /
                                             static_cast<double>(total));
  char from_s[32];
  std::snprintf(from_s, sizeof from_s, "%.3f", first_dropped_ts_us_ * 1e-6);
  return sv_cat("the trace dropped ", std::to_string(num_dropped_), " of ",
                std::to_string(total), " events (", pct, "%) past its cap of max_events = ",
                std::to_string(max_events_), ": events from t = ", from_s,
                " s on are missing or incomplete. Keep them with a larger cap (muflow run "
                "--trace-max-events N; each event costs a few hundred bytes of memory until "
                "the trace is written) or trace a shorter run");
}

nlohmann::json TraceRecorder::other_data_locked() const {
  nlohmann::json other = other_data_;
  other["max_events"] = max_events_;
  other["num_events"] = static_cast<int64_t>(events_.size());
  other["num_dropped_events"] = num_dropped_;
  if (num_dropped_ > 0) other["warning"] = dropped_warning_locked();
  return other;
}

std::vector<const TraceEvent*> TraceRecorder::sorted_locked() const {
  std::vector<const TraceEvent*> order;
  order.reserve(events_.size());
  for (const TraceEvent& e : events_) order.push_back(&e);
  std::sort(order.begin(), order.end(),
            [](const TraceEvent* a, const TraceEvent* b) { return event_less(*a, *b); });
  return order;
}

nlohmann::json TraceRecorder::other_data() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return other_data_locked();
}

absl::Status TraceRecorder::visit_events(
    const std::function<absl::Status(const TraceEvent&)>& visit) const {
  std::lock_guard<std::mutex> lock(mutex_);
  // The metadata as metadata_json() writes it.
  const auto metadata = [&](const char* kind, int64_t pid, int64_t tid, const std::string& name) {
    TraceEvent m;
    m.name = kind;
    m.phase = 'M';
    m.pid = pid;
    m.tid = tid;
    m.args = {{"name", name}};
    return visit(m);
  };
  for (const auto& [pid, name] : process_names_) {
    if (absl::Status s = metadata("process_name", pid, 0, name); !s.ok()) return s;
  }
  for (const auto& [key, name] : thread_names_) {
    if (absl::Status s = metadata("thread_name", key.first, key.second, name); !s.ok()) return s;
  }
  for (const TraceEvent* e : sorted_locked()) {
    if (absl::Status s = visit(*e); !s.ok()) return s;
  }
  return absl::OkStatus();
}

nlohmann::json TraceRecorder::to_json() const {
  std::vector<TraceEvent> events;
  nlohmann::json out = {{"traceEvents", nlohmann::json::array()}, {"displayTimeUnit", "ms"}};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events = events_;
    nlohmann::json& list = out["traceEvents"];
    for (const auto& [pid, name] : process_names_) {
      list.push_back(metadata_json("process_name", pid, 0, name));
    }
    for (const auto& [key, name] : thread_names_) {
      list.push_back(metadata_json("thread_name", key.first, key.second, name));
    }
    out["otherData"] = other_data_locked();
  }
  std::sort(events.begin(), events.end(), event_less);
  nlohmann::json& list = out["traceEvents"];
  for (const TraceEvent& e : events) list.push_back(event_json(e));
  return out;
}

absl::Status TraceRecorder::write_json(const std::string& path) const {
  namespace fs = std::filesystem;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) {
      return io_error(ec.value(), sv_cat("cannot create folder '", parent.string(),
                                         "' for trace '", path, "'"));
    }
  }
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    const int err = errno;
    return io_error(err, sv_cat("cannot write trace '", path, "'"));
  }
  // Streams one event per line (valid JSON that diffs and greps well) in the same order as
  // to_json(), without building the whole document: peak memory stays near the recorder's.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::vector<const TraceEvent*> order = sorted_locked();
    out << "{\"traceEvents\":[";
    bool first = true;
    auto emit = [&](const nlohmann::json& j) {
      out << (first ? "\n" : ",\n") << j.dump();
      first = false;
    };
    for (const auto& [pid, name] : process_names_) {
      emit(metadata_json("process_name", pid, 0, name));
    }
    for (const auto& [key, name] : thread_names_) {
      emit(metadata_json("thread_name", key.first, key.second, name));
    }
    for (const TraceEvent* e : order) emit(event_json(*e));
    out << "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":" << other_data_locked().dump()
        << "}\n";
  }
  out.flush();
  if (!out) {
    const int err = errno;
    return io_error(err, sv_cat("cannot write trace '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace muflow::engine::trace
