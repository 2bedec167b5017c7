#include "engine/serving/azure_trace.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "engine/model/model_limits.hpp"
#include "engine/sv_cat.hpp"

namespace muflow::engine::serving {
namespace {

constexpr int64_t kNsPerSecond = 1'000'000'000;

// Reads exactly `width` decimal digits at text[*pos]; false if any is not a digit.
bool read_digits(std::string_view text, size_t* pos, size_t width, int64_t* out) {
  if (*pos + width > text.size()) return false;
  int64_t value = 0;
  for (size_t i = 0; i < width; ++i) {
    const char c = text[*pos + i];
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  *pos += width;
  *out = value;
  return true;
}

bool expect_char(std::string_view text, size_t* pos, std::string_view allowed) {
  if (*pos >= text.size() || allowed.find(text[*pos]) == std::string_view::npos) return false;
  ++*pos;
  return true;
}

bool is_leap(int64_t year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

int64_t days_in_month(int64_t year, int64_t month) {
  static constexpr int64_t kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && is_leap(year) ? 29 : kDays[month - 1];
}

// Days from 1970-01-01 to year-month-day (proleptic Gregorian, year >= 1970).
int64_t days_since_epoch(int64_t year, int64_t month, int64_t day) {
  const auto leaps_through = [](int64_t y) { return y / 4 - y / 100 + y / 400; };
  int64_t days = 365 * (year - 1970) + leaps_through(year - 1) - leaps_through(1969);
  for (int64_t m = 1; m < month; ++m) days += days_in_month(year, m);
  return days + day - 1;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::vector<std::string_view> split_commas(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  for (;;) {
    const size_t comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma == std::string_view::npos
                                                 ? std::string_view::npos
                                                 : comma - start)));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

}  // namespace

absl::StatusOr<int64_t> parse_trace_timestamp_ns(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(sv_cat("timestamp '", text, "': ", why,
                                             "; expected YYYY-MM-DD HH:MM:SS[.fraction]"));
  };
  size_t pos = 0;
  int64_t year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!read_digits(text, &pos, 4, &year) || !expect_char(text, &pos, "-") ||
      !read_digits(text, &pos, 2, &month) || !expect_char(text, &pos, "-") ||
      !read_digits(text, &pos, 2, &day) || !expect_char(text, &pos, " T") ||
      !read_digits(text, &pos, 2, &hour) || !expect_char(text, &pos, ":") ||
      !read_digits(text, &pos, 2, &minute) || !expect_char(text, &pos, ":") ||
      !read_digits(text, &pos, 2, &second)) {
    return bad("malformed");
  }
  int64_t fraction_ns = 0;
  if (pos < text.size()) {
    if (text[pos] != '.') return bad("unexpected characters after the seconds");
    ++pos;
    const size_t num_digits = text.size() - pos;
    if (num_digits == 0 || num_digits > 9) return bad("expected 1 to 9 fraction digits");
    int64_t digits = 0;
    if (!read_digits(text, &pos, num_digits, &digits)) return bad("malformed fraction");
    fraction_ns = digits;
    for (size_t i = num_digits; i < 9; ++i) fraction_ns *= 10;
  }
  // Nanoseconds since 1970 fit int64 until 2262-04-11: later years are refused, not wrapped.
  if (year < 1970 || year > 2261 || month < 1 || month > 12 || day < 1 ||
      day > days_in_month(year, month) || hour > 23 || minute > 59 || second > 60) {
    return bad("date or time out of range (years 1970 to 2261)");
  }
  const int64_t seconds =
      days_since_epoch(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  return seconds * kNsPerSecond + fraction_ns;
}

absl::StatusOr<std::vector<TraceRow>> parse_azure_trace(std::string_view text,
                                                        const std::string& source_name,
                                                        int64_t max_rows) {
  std::vector<TraceRow> rows;
  std::vector<int64_t> stamps_ns;
  size_t col_time = 0, col_context = 0, col_generated = 0, num_columns = 0;
  bool have_header = false;
  int64_t line_no = 0;
  // A UTF-8 byte-order mark (spreadsheet exports) is not part of the first column's name.
  size_t start = text.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
  while (start <= text.size() && (max_rows <= 0 || static_cast<int64_t>(rows.size()) < max_rows)) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = trim(text.substr(start, end - start));
    start = end + 1;
    ++line_no;
    if (line.empty()) continue;
    const std::vector<std::string_view> fields = split_commas(line);
    if (!have_header) {
      const auto find = [&](std::string_view name) {
        return static_cast<size_t>(std::find(fields.begin(), fields.end(), name) -
                                   fields.begin());
      };
      col_time = find("TIMESTAMP");
      col_context = find("ContextTokens");
      col_generated = find("GeneratedTokens");
      num_columns = fields.size();
      if (col_time == num_columns || col_context == num_columns ||
          col_generated == num_columns) {
        return absl::InvalidArgumentError(sv_cat(
            source_name, ":", line_no,
            ": header must name the columns TIMESTAMP, ContextTokens, GeneratedTokens; got '",
            line, "'"));
      }
      have_header = true;
      continue;
    }
    const auto row_error = [&](std::string_view what) {
      return absl::InvalidArgumentError(sv_cat(source_name, ":", line_no, ": ", what));
    };
    if (fields.size() != num_columns) {
      return row_error(sv_cat("expected ", num_columns, " comma-separated fields, got ",
                              fields.size(), " in '", line, "'"));
    }
    absl::StatusOr<int64_t> ns = parse_trace_timestamp_ns(fields[col_time]);
    if (!ns.ok()) return row_error(sv_cat("column TIMESTAMP: ", ns.status().message()));
    TraceRow row;
    row.line = line_no;
    const std::pair<size_t, int64_t*> counts[] = {{col_context, &row.context_tokens},
                                                  {col_generated, &row.generated_tokens}};
    for (const auto& [col, out] : counts) {
      const std::string_view field = fields[col];
      // Lengths become prompts and generation budgets: bounded before anything is built.
      const char* column = col == col_context ? "ContextTokens" : "GeneratedTokens";
      if (!absl::SimpleAtoi(absl::string_view(field.data(), field.size()), out) || *out < 1) {
        return row_error(
            sv_cat("column ", column, ": expected a positive integer, got '", field, "'"));
      }
      if (*out > model::kMaxPositions) {
        return row_error(sv_cat("column ", column, ": expected at most ", model::kMaxPositions,
                                " tokens, got '", field, "'"));
      }
    }
    stamps_ns.push_back(*ns);
    rows.push_back(row);
  }
  if (!have_header) {
    return absl::InvalidArgumentError(
        sv_cat(source_name, ": empty trace; expected a header TIMESTAMP,ContextTokens,"
                            "GeneratedTokens and at least one row"));
  }
  if (rows.empty()) {
    return absl::InvalidArgumentError(sv_cat(source_name, ": trace has a header but no rows"));
  }
  const int64_t first_ns = *std::min_element(stamps_ns.begin(), stamps_ns.end());
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].arrival_s = static_cast<double>(stamps_ns[i] - first_ns) / kNsPerSecond;
  }
  return rows;
}

absl::StatusOr<std::vector<TraceRow>> read_azure_trace(const std::string& path,
                                                       int64_t max_rows) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(sv_cat("cannot open request trace '", path, "'"));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_azure_trace(text.str(), path, max_rows);
}

}  // namespace muflow::engine::serving
