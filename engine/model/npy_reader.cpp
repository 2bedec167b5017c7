#include "engine/model/npy_reader.hpp"

#include <cctype>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace muflow::engine::model {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kPreambleLen = 10;  // magic, major, minor, uint16 header length

/// A recursive-descent reader of the one dict shape NumPy writes:
/// {'descr': '<i8', 'fortran_order': False, 'shape': (40800, 6), }
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  /// Parses the dict; on error returns a message (without the path prefix).
  std::optional<std::string> parse() {
    skip_space();
    if (!eat('{')) return "header is not a dict";
    while (true) {
      skip_space();
      if (eat('}')) break;
      std::string key;
      if (!quoted(&key)) return "header: expected a quoted key";
      skip_space();
      if (!eat(':')) return absl::StrCat("header: expected ':' after key '", key, "'");
      skip_space();
      if (key == "descr") {
        if (!quoted(&descr)) return "header: 'descr' is not a string";
        has_descr = true;
      } else if (key == "fortran_order") {
        if (word("True")) {
          fortran_order = true;
        } else if (word("False")) {
          fortran_order = false;
        } else {
          return "header: 'fortran_order' is not True or False";
        }
        has_fortran = true;
      } else if (key == "shape") {
        if (auto err = tuple(); err) return err;
        has_shape = true;
      } else {
        return absl::StrCat("header: unexpected key '", key, "'");
      }
      skip_space();
      if (eat(',')) continue;
      skip_space();
      if (eat('}')) break;
      return "header: expected ',' or '}'";
    }
    skip_space();
    if (pos_ != text_.size()) return "header: trailing characters after the dict";
    if (!has_descr || !has_fortran || !has_shape) {
      return "header: needs the keys 'descr', 'fortran_order' and 'shape'";
    }
    return std::nullopt;
  }

  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  bool has_descr = false, has_fortran = false, has_shape = false;

 private:
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool word(std::string_view w) {
    if (text_.substr(pos_, w.size()) == w) {
      pos_ += w.size();
      return true;
    }
    return false;
  }
  bool quoted(std::string* out) {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    const char q = text_[pos_++];
    const size_t end = text_.find(q, pos_);
    if (end == std::string_view::npos) return false;
    *out = std::string(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }
  std::optional<std::string> tuple() {
    if (!eat('(')) return "header: 'shape' is not a tuple";
    while (true) {
      skip_space();
      if (eat(')')) return std::nullopt;
      if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        return "header: 'shape' must hold non-negative integers";
      }
      int64_t v = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        const int d = text_[pos_++] - '0';
        if (v > (std::numeric_limits<int64_t>::max() - d) / 10) {
          return "header: a 'shape' dim is too large";
        }
        v = v * 10 + d;
      }
      shape.push_back(v);
      skip_space();
      if (eat(',')) continue;
      skip_space();
      if (eat(')')) return std::nullopt;
      return "header: expected ',' or ')' in 'shape'";
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<NpyInt64Array> read_npy_i64(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open .npy file"));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto invalid = [&](const std::string& msg) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", msg));
  };
  if (bytes.size() < kPreambleLen || std::memcmp(bytes.data(), kMagic, kMagicLen) != 0) {
    return invalid("not a .npy file (bad magic; expected \\x93NUMPY)");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  if (major != 1 || minor != 0) {
    return invalid(
        absl::StrCat(".npy version ", major, ".", minor, " not supported; expected 1.0"));
  }
  const size_t header_len = static_cast<unsigned char>(bytes[8]) |
                            (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  if (bytes.size() < kPreambleLen + header_len) {
    return invalid(absl::StrCat("truncated header (", header_len, " header bytes declared, ",
                                bytes.size() - kPreambleLen, " present)"));
  }
  std::string_view header(bytes.data() + kPreambleLen, header_len);
  if (header.empty() || header.back() != '\n') return invalid("header does not end in '\\n'");
  HeaderParser parser(header);
  if (auto err = parser.parse(); err) return invalid(*err);
  if (parser.descr != "<i8") {
    return invalid(absl::StrCat("dtype '", parser.descr, "' not supported; expected '<i8'"));
  }
  if (parser.fortran_order) {
    return invalid("fortran_order is True; only C-order arrays are supported");
  }
  NpyInt64Array out;
  out.shape = parser.shape;
  int64_t count = 1;
  for (int64_t d : out.shape) {
    if (d != 0 && count > std::numeric_limits<int64_t>::max() / 8 / d) {
      return invalid("shape is too large");
    }
    count *= d;
  }
  const size_t data_bytes = bytes.size() - kPreambleLen - header_len;
  if (data_bytes != static_cast<size_t>(count) * 8) {
    return invalid(absl::StrCat("data size ", data_bytes, " bytes does not match the shape (",
                                count, " int64 values = ", count * 8, " bytes); ",
                                data_bytes < static_cast<size_t>(count) * 8
                                    ? "the file is truncated"
                                    : "the file has trailing bytes"));
  }
  out.data.resize(static_cast<size_t>(count));
  const char* src = bytes.data() + kPreambleLen + header_len;
  for (int64_t i = 0; i < count; ++i) {
    uint64_t v = 0;
    for (int b = 7; b >= 0; --b) v = (v << 8) | static_cast<unsigned char>(src[i * 8 + b]);
    out.data[static_cast<size_t>(i)] = static_cast<int64_t>(v);
  }
  return out;
}

}  // namespace muflow::engine::model
