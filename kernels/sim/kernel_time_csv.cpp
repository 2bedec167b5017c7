#include "kernels/sim/kernel_time_csv.hpp"

#include <cmath>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace muflow::kernels::sim {
namespace {

std::vector<absl::string_view> split_fields(absl::string_view line) {
  std::vector<absl::string_view> fields = absl::StrSplit(line, ',');
  for (absl::string_view& f : fields) f = absl::StripAsciiWhitespace(f);
  return fields;
}

int find_column(const std::vector<absl::string_view>& header, absl::string_view a,
                absl::string_view b) {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == a || header[i] == b) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

absl::StatusOr<std::vector<KernelTimeSample>> read_kernel_times_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open kernel-times CSV"));

  std::string raw;
  int line_no = 0;
  std::vector<std::string> header_storage;
  std::vector<absl::string_view> header;
  int tok_col = -1;
  int time_col = -1;
  std::vector<KernelTimeSample> samples;
  while (std::getline(in, raw)) {
    ++line_no;
    absl::string_view line = absl::StripSuffix(raw, "\r");
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    if (header.empty()) {
      for (absl::string_view f : split_fields(line)) header_storage.emplace_back(f);
      for (const std::string& f : header_storage) header.push_back(f);
      tok_col = find_column(header, "num_toks", "num_tokens");
      time_col = find_column(header, "time", "time_ms");
      if (tok_col < 0 || time_col < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", line_no, ": header '", line,
                         "' needs a token column (num_toks or num_tokens) and a time column in ms "
                         "(time or time_ms)"));
      }
      continue;
    }
    const std::vector<absl::string_view> fields = split_fields(line);
    if (fields.size() != header.size()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": expected ",
                                                     header.size(), " fields like the header, got ",
                                                     fields.size()));
    }
    KernelTimeSample sample{.line = line_no};
    const absl::string_view tok = fields[tok_col];
    if (!absl::SimpleAtoi(tok, &sample.num_tokens) || sample.num_tokens < 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": ", header[tok_col],
                                                     " '", tok, "' is not a non-negative integer"));
    }
    double ms = 0;
    const absl::string_view time = fields[time_col];
    if (!absl::SimpleAtod(time, &ms) || !std::isfinite(ms) || ms < 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": ", header[time_col],
                                                     " '", time,
                                                     "' is not a finite non-negative number of "
                                                     "milliseconds"));
    }
    sample.seconds = ms * 1e-3;
    samples.push_back(sample);
  }
  if (header.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": empty file, expected a header such as ',num_toks,time'"));
  }
  if (samples.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no data rows after the header"));
  }
  return samples;
}

}  // namespace muflow::kernels::sim
