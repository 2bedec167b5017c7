#pragma once
/// \file
/// Typed, checked reads from one toml++ table, with errors a user can act on:
/// "FILE:LINE: key 'workload.max_new_tokens': expected a positive integer, got string".
/// Used by the topology parser (engine/topology/topology.cpp); usable by any TOML-reading loader.

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "absl/status/status.h"

namespace muflow::engine::topology {

/// Human name of a TOML value's type: "string", "integer", "float", "boolean", "table",
/// "array", "date", "time", "date-time".
std::string toml_type_name(const toml::node& node);

/// Reads keys of one TOML table. Every `read_*` leaves its output untouched when the key is
/// absent (so callers pre-fill defaults) and returns InvalidArgument naming source file,
/// line and dotted key when the value has the wrong type or is out of range.
///
/// Holds references to the table and nothing else; it must not outlive the parsed document.
/// Not thread-safe (one parser thread).
class TomlTableReader {
 public:
  /// `table`: the table to read; `source`: file name for messages; `prefix`: dotted path of
  /// the table ("" for the root, "model" for [model], "cluster.devices[2]" for an array item).
  TomlTableReader(const toml::table& table, std::string source, std::string prefix);

  /// InvalidArgument "FILE:LINE: unknown key 'prefix.k'; expected one of: a, b, c" for the
  /// first key (in line order) that is not in `allowed`.
  absl::Status check_keys(std::span<const std::string_view> allowed) const;

  /// True when `key` is present.
  bool has(std::string_view key) const;
  /// The node of `key`, or nullptr.
  const toml::node* node(std::string_view key) const;
  /// 1-based line of `key`'s value; of the table itself when the key is absent; 0 if unknown.
  int64_t line_of(std::string_view key) const;
  /// "prefix.key" (or "key" at the root).
  std::string dotted(std::string_view key) const;
  /// InvalidArgument "FILE:LINE: key 'prefix.key': <what>".
  absl::Status error(std::string_view key, std::string_view what) const;
  /// InvalidArgument "FILE:LINE: <what>" at the table's own line (for whole-table problems).
  absl::Status table_error(std::string_view what) const;

  /// Integer ≥ `min` ("a positive integer" when min is 1, "a non-negative integer" when 0).
  /// Integer in [min, max]; `max` bounds sizes read from the file before anything is sized by
  /// them.
  absl::Status read_int(std::string_view key, int64_t* out, int64_t min,
                        int64_t max = std::numeric_limits<int64_t>::max()) const;
  /// Non-negative integer as uint64 (seeds).
  absl::Status read_seed(std::string_view key, uint64_t* out) const;
  /// Float or integer; `ok` checks the range and `expected` describes it ("a number > 0").
  absl::Status read_double(std::string_view key, double* out, std::string_view expected,
                           const std::function<bool(double)>& ok) const;
  absl::Status read_bool(std::string_view key, bool* out) const;
  /// Non-empty string.
  absl::Status read_string(std::string_view key, std::string* out) const;
  /// String that must be one of `allowed` ("expected one of: sync; got 'async'").
  absl::Status read_choice(std::string_view key, std::string* out,
                           std::span<const std::string_view> allowed) const;
  /// Two-integer array [lo, hi] with min ≤ lo ≤ hi.
  absl::Status read_int_range(std::string_view key, int64_t* lo, int64_t* hi, int64_t min,
                              int64_t max = std::numeric_limits<int64_t>::max()) const;
  /// Sub-table `key`; nullptr when absent; InvalidArgument when present but not a table.
  absl::Status read_table(std::string_view key, const toml::table** out) const;

  const toml::table& table() const { return table_; }
  const std::string& source() const { return source_; }
  const std::string& prefix() const { return prefix_; }

 private:
  absl::Status type_error(std::string_view key, std::string_view expected,
                          const toml::node& got) const;

  const toml::table& table_;
  std::string source_;
  std::string prefix_;
};

/// "FILE:LINE: what" (or "FILE: what" when line is 0) as InvalidArgument.
absl::Status located_error(std::string_view source, int64_t line, std::string_view what);

}  // namespace muflow::engine::topology
