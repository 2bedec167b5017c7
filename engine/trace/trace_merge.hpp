#pragma once
/// \file
/// Merging another recorder's trace into this one: the trace of a run that spans processes
/// (#18) is the driver's events plus each worker's (its devices' stage slices, counters and
/// wait lanes), on the driver's clock.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/trace/trace.hpp"

namespace muflow::engine::trace {

/// Adds every event of `trace` (a `TraceRecorder::to_json()` document, e.g. a worker's) to
/// `into`, each time moved by `shift_us` microseconds (the other clock's origin on `into`'s
/// clock); process and thread names are merged too (later ones win), `otherData` is not.
/// Events count against `into`'s max_events like its own. Flow ids are kept (muflow's are
/// global: iteration, block, devices). Returns the number of events handed to `into` (names
/// excluded; its cap may drop some).
/// Errors (InvalidArgument, prefixed with `source`): what `visit_trace_events` refuses, an
/// event phase muflow does not record ('X', 'i', 'C', 's', 'f', 'M' are), a flow without a
/// numeric "id", or a metadata event without a string args.name. Nothing is added to `into`
/// on an error. Thread safety: `into`'s (any thread).
absl::StatusOr<int64_t> merge_trace(const nlohmann::json& trace, const std::string& source,
                                    double shift_us, TraceRecorder& into);

}  // namespace muflow::engine::trace
