#pragma once
/// \file
/// Reader for CSVs of measured kernel times vs batch size, the input of
/// `CostModel::calibrate_expert_ffn`. Example: ../shared/data/kernels/
/// v100-switch-expert-time-vs-tokens.csv (HarMoEny artifact), whose header is `,num_toks,time`.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace muflow::kernels::sim {

/// One measured call.
struct KernelTimeSample {
  int64_t num_tokens = 0;  ///< batch size, tokens
  double seconds = 0;      ///< measured time, seconds (the file holds milliseconds)
  int line = 0;            ///< 1-based line in the file, for messages
};

/// Reads `path`: a header line, then one row per measurement, comma-separated, every row with
/// the header's number of fields. The header names the token column `num_toks` or
/// `num_tokens` and the time column `time` or `time_ms` (milliseconds); other columns (e.g.
/// pandas' unnamed index) are ignored. Blank lines are skipped; CRLF is accepted.
/// Errors (message starts with "path:line:" where there is a line):
/// - NotFound: the file cannot be opened;
/// - InvalidArgument: empty file, missing column, wrong field count, a token count that is not
///   a non-negative integer, a time that is not a finite non-negative number, no data rows.
/// Thread-safe (no shared state).
absl::StatusOr<std::vector<KernelTimeSample>> read_kernel_times_csv(const std::string& path);

}  // namespace muflow::kernels::sim
