#pragma once
/// \file
/// Reader for request traces in the format of the Azure LLM inference traces (Azure Public
/// Dataset, AzureLLMInferenceTrace_*.csv; Patel et al., "Splitwise", ISCA 2024):
///
///     TIMESTAMP,ContextTokens,GeneratedTokens
///     2023-11-16 18:17:03.9799600,4808,10
///
/// Columns are found by header name (any order, extra columns ignored).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace muflow::engine::serving {

/// One request of a trace.
struct TraceRow {
  double arrival_s = 0.0;        ///< seconds since the earliest TIMESTAMP of the rows read
  int64_t context_tokens = 0;    ///< prompt length in tokens (>= 1)
  int64_t generated_tokens = 0;  ///< output length in tokens (>= 1)
  int64_t line = 0;              ///< 1-based line in the file (for messages)
};

/// Parses "YYYY-MM-DD HH:MM:SS[.fraction]" (a 'T' may replace the space; up to 9 fraction
/// digits; read as UTC) into nanoseconds since 1970-01-01T00:00:00. InvalidArgument
/// describing the expected form when malformed or out of range. Pure; any thread.
absl::StatusOr<int64_t> parse_trace_timestamp_ns(std::string_view text);

/// Parses trace CSV text. `source_name` is used in messages; `max_rows` > 0 keeps only the
/// first max_rows data rows (0 = all). Blank lines are skipped; a trailing '\r' is
/// ignored. Rows keep file order. Errors (InvalidArgument "SOURCE:LINE: ..."): missing
/// header column, wrong number of fields, malformed timestamp, token counts that are not
/// positive integers, no data rows. Pure; any thread.
absl::StatusOr<std::vector<TraceRow>> parse_azure_trace(std::string_view text,
                                                        const std::string& source_name,
                                                        int64_t max_rows);

/// Reads and parses the file at `path` (as parse_azure_trace). NotFound naming the path when
/// it cannot be opened.
absl::StatusOr<std::vector<TraceRow>> read_azure_trace(const std::string& path,
                                                       int64_t max_rows);

}  // namespace muflow::engine::serving
