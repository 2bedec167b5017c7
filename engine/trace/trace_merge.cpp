#include "engine/trace/trace_merge.hpp"

#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/trace/trace_reader.hpp"

namespace muflow::engine::trace {
namespace {

// One event of the other trace, checked and copied (the views of a visit die with it).
struct Pending {
  char phase = 0;
  std::string name, cat;
  int64_t pid = 0, tid = 0;
  double ts_us = 0.0, dur_us = 0.0;
  nlohmann::json args;
  InstantScope scope = InstantScope::kThread;
  uint64_t flow_id = 0;
  bool process_name = false;  // 'M': process_name (else thread_name)
};

}  // namespace

absl::StatusOr<int64_t> merge_trace(const nlohmann::json& trace, const std::string& source,
                                    double shift_us, TraceRecorder& into) {
  std::vector<Pending> pending;
  const nlohmann::json& list =
      trace.is_object() && trace.contains("traceEvents") ? trace["traceEvents"] : trace;
  auto bad = [&](size_t index, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: event %d: %s", source, index, what));
  };
  nlohmann::json other_data;
  absl::Status visited = visit_trace_events(
      trace, source,
      [&](const TraceEventView& e) -> absl::Status {
        const nlohmann::json& raw = list[e.index];
        Pending p;
        p.phase = e.phase;
        p.name = std::string(e.name);
        p.cat = std::string(e.cat);
        p.pid = e.pid;
        p.tid = e.tid;
        p.ts_us = e.ts_us + shift_us;
        p.dur_us = e.dur_us;
        if (e.args != nullptr) p.args = *e.args;
        switch (e.phase) {
          case 'X':
          case 'C':
            break;
          case 'i': {
            const std::string s = raw.contains("s") && raw["s"].is_string()
                                      ? raw["s"].get<std::string>()
                                      : std::string("t");
            p.scope = s == "g" ? InstantScope::kGlobal
                               : s == "p" ? InstantScope::kProcess : InstantScope::kThread;
            break;
          }
          case 's':
          case 'f':
            if (!raw.contains("id") || !raw["id"].is_number_unsigned()) {
              return bad(e.index, "a flow event without a numeric \"id\"");
            }
            p.flow_id = raw["id"].get<uint64_t>();
            break;
          case 'M': {
            if (e.args == nullptr || !e.args->contains("name") || !(*e.args)["name"].is_string()) {
              return bad(e.index, "a metadata event without a string args.name");
            }
            if (e.name != "process_name" && e.name != "thread_name") {
              return bad(e.index, "metadata '" + p.name + "' (muflow writes process_name and "
                                  "thread_name)");
            }
            p.process_name = e.name == "process_name";
            p.name = (*e.args)["name"].get<std::string>();
            break;
          }
          default:
            return bad(e.index, absl::StrFormat("phase '%c' (muflow records X, i, C, s, f, M)",
                                                e.phase));
        }
        pending.push_back(std::move(p));
        return absl::OkStatus();
      },
      &other_data);
  if (!visited.ok()) return visited;
  int64_t added = 0;
  for (Pending& p : pending) {
    switch (p.phase) {
      case 'X':
        if (p.cat.empty()) {
          into.complete(std::move(p.name), p.pid, p.tid, p.ts_us, p.dur_us, std::move(p.args));
        } else {
          into.complete_in(std::move(p.cat), std::move(p.name), p.pid, p.tid, p.ts_us, p.dur_us,
                           std::move(p.args));
        }
        ++added;
        break;
      case 'C':
        into.counter(std::move(p.name), p.pid, p.ts_us,
                     p.args.is_null() ? nlohmann::json::object() : std::move(p.args));
        ++added;
        break;
      case 'i':
        into.instant(std::move(p.name), p.pid, p.tid, p.ts_us, p.scope, std::move(p.args));
        ++added;
        break;
      case 's':
      case 'f':
        into.flow(p.phase, std::move(p.cat), std::move(p.name), p.flow_id, p.pid, p.tid, p.ts_us);
        ++added;
        break;
      case 'M':
        if (p.process_name) {
          into.set_process_name(p.pid, std::move(p.name));
        } else {
          into.set_thread_name(p.pid, p.tid, std::move(p.name));
        }
        break;
      default:
        break;
    }
  }
  return added;
}

}  // namespace muflow::engine::trace
