#include "engine/topology/toml_reader.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "engine/sv_cat.hpp"
#include "engine/sv_cat.hpp"

namespace muflow::engine::topology {

std::string toml_type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "table";
    case toml::node_type::array: return "array";
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

absl::Status located_error(std::string_view source, int64_t line, std::string_view what) {
  if (line > 0) return absl::InvalidArgumentError(sv_cat(source, ":", line, ": ", what));
  return absl::InvalidArgumentError(sv_cat(source, ": ", what));
}

TomlTableReader::TomlTableReader(const toml::table& table, std::string source,
                                 std::string prefix)
    : table_(table), source_(std::move(source)), prefix_(std::move(prefix)) {}

absl::Status TomlTableReader::check_keys(std::span<const std::string_view> allowed) const {
  // Report the first offending key in file order, so the message is deterministic.
  const toml::key* first = nullptr;
  for (const auto& [key, value] : table_) {
    if (std::find(allowed.begin(), allowed.end(), key.str()) != allowed.end()) continue;
    if (first == nullptr || key.source().begin.line < first->source().begin.line) first = &key;
  }
  if (first == nullptr) return absl::OkStatus();
  int64_t line = first->source().begin.line;
  if (line == 0) line = line_of(first->str());
  return located_error(source_, line,
                       sv_cat("unknown key '", dotted(first->str()),
                                    "'; expected one of: ", sv_join(allowed, ", ")));
}

bool TomlTableReader::has(std::string_view key) const { return table_.contains(key); }

const toml::node* TomlTableReader::node(std::string_view key) const { return table_.get(key); }

int64_t TomlTableReader::line_of(std::string_view key) const {
  if (const toml::node* n = table_.get(key); n != nullptr && n->source().begin.line > 0) {
    return n->source().begin.line;
  }
  return table_.source().begin.line;
}

std::string TomlTableReader::dotted(std::string_view key) const {
  if (prefix_.empty()) return std::string(key);
  return sv_cat(prefix_, ".", key);
}

absl::Status TomlTableReader::error(std::string_view key, std::string_view what) const {
  return located_error(source_, line_of(key), sv_cat("key '", dotted(key), "': ", what));
}

absl::Status TomlTableReader::table_error(std::string_view what) const {
  return located_error(source_, table_.source().begin.line, what);
}

absl::Status TomlTableReader::type_error(std::string_view key, std::string_view expected,
                                         const toml::node& got) const {
  return error(key, sv_cat("expected ", expected, ", got ", toml_type_name(got)));
}

namespace {
std::string int_expectation(int64_t min) {
  if (min == 1) return "a positive integer";
  if (min == 0) return "a non-negative integer";
  return sv_cat("an integer >= ", min);
}
}  // namespace

absl::Status TomlTableReader::read_int(std::string_view key, int64_t* out, int64_t min,
                                       int64_t max) const {
  const toml::node* n = node(key);
  if (n == nullptr) return absl::OkStatus();
  const std::string expected = int_expectation(min);
  const auto* v = n->as_integer();
  if (v == nullptr) return type_error(key, expected, *n);
  if (v->get() < min) return error(key, sv_cat("expected ", expected, ", got ", v->get()));
  if (v->get() > max) {
    return error(key, sv_cat("expected ", expected, " up to ", max, ", got ", v->get()));
  }
  *out = v->get();
  return absl::OkStatus();
}

absl::Status TomlTableReader::read_seed(std::string_view key, uint64_t* out) const {
  int64_t value = static_cast<int64_t>(*out);
  if (absl::Status s = read_int(key, &value, 0); !s.ok()) return s;
  *out = static_cast<uint64_t>(value);
  return absl::OkStatus();
}

absl::Status TomlTableReader::read_double(std::string_view key, double* out,
                                          std::string_view expected,
                                          const std::function<bool(double)>& ok) const {
  const toml::node* n = node(key);
  if (n == nullptr) return absl::OkStatus();
  double value = 0.0;
  if (const auto* f = n->as_floating_point()) {
    value = f->get();
  } else if (const auto* i = n->as_integer()) {
    value = static_cast<double>(i->get());
  } else {
    return type_error(key, expected, *n);
  }
  if (!ok(value)) return error(key, sv_cat("expected ", expected, ", got ", value));
  *out = value;
  return absl::OkStatus();
}

absl::Status TomlTableReader::read_bool(std::string_view key, bool* out) const {
  const toml::node* n = node(key);
  if (n == nullptr) return absl::OkStatus();
  const auto* v = n->as_boolean();
  if (v == nullptr) return type_error(key, "true or false", *n);
  *out = v->get();
  return absl::OkStatus();
}

absl::Status TomlTableReader::read_string(std::string_view key, std::string* out) const {
  const toml::node* n = node(key);
  if (n == nullptr) return absl::OkStatus();
  const auto* v = n->as_string();
  if (v == nullptr) return type_error(key, "a string", *n);
  if (v->get().empty()) return error(key, "expected a non-empty string, got \"\"");
  *out = v->get();
  return absl::OkStatus();
}

absl::Status TomlTableReader::read_choice(std::string_view key, std::string* out,
                                          std::span<const std::string_view> allowed) const {
  const std::string expected = sv_cat("one of: ", sv_join(allowed, ", "));
  const toml::node* n = node(key);
  if (n == nullptr) return absl::OkStatus();
  const auto* v = n->as_string();
  if (v == nullptr) return type_error(key, sv_cat("a string, ", expected), *n);
  if (std::find(allowed.begin(), allowed.end(), v->get()) == allowed.end()) {
    return error(key, sv_cat("expected ", expected, "; got '", v->get(), "'"));
  }
  *out = v->get();
  return absl::OkStatus();
}

absl::Status TomlTableReader::read_int_range(std::string_view key, int64_t* lo, int64_t* hi,
                                             int64_t min, int64_t max) const {
  const toml::node* n = node(key);
  if (n == nullptr) return absl::OkStatus();
  const std::string expected = sv_cat(
      "[min, max] with ", min == 1 ? "positive integers" : sv_cat("integers >= ", min),
      " and min <= max");
  const auto* arr = n->as_array();
  if (arr == nullptr) return type_error(key, expected, *n);
  if (arr->size() != 2) {
    return error(key, sv_cat("expected ", expected, ", got an array of ", arr->size(),
                                   " values"));
  }
  int64_t values[2] = {0, 0};
  for (size_t i = 0; i < 2; ++i) {
    const auto* v = (*arr)[i].as_integer();
    if (v == nullptr) {
      return error(key, sv_cat("expected ", expected, ", got ",
                                     toml_type_name((*arr)[i]), " at index ", i));
    }
    values[i] = v->get();
  }
  if (values[1] > max) {
    return error(key, sv_cat("expected ", expected, " up to ", max, ", got ", values[1]));
  }
  if (values[0] < min || values[1] < min || values[0] > values[1]) {
    return error(key, sv_cat("expected ", expected, ", got [", values[0], ", ", values[1],
                                   "]"));
  }
  *lo = values[0];
  *hi = values[1];
  return absl::OkStatus();
}

absl::Status TomlTableReader::read_table(std::string_view key, const toml::table** out) const {
  *out = nullptr;
  const toml::node* n = node(key);
  if (n == nullptr) return absl::OkStatus();
  const auto* t = n->as_table();
  if (t == nullptr) return type_error(key, "a table", *n);
  *out = t;
  return absl::OkStatus();
}

}  // namespace muflow::engine::topology
