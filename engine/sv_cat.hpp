#pragma once
/// \file
/// absl::StrCat / StrJoin for arguments that include std::string_view. Debian's Abseil
/// (20220623) is built with its own absl::string_view, which absl::StrCat does not accept
/// from std::string_view; these forwarders convert. Header-only, any thread.

#include <string>
#include <string_view>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace muflow::engine {

namespace sv_cat_detail {
template <typename T>
decltype(auto) alpha(const T& value) {
  if constexpr (std::is_convertible_v<const T&, std::string_view> &&
                !std::is_convertible_v<const T&, absl::string_view>) {
    const std::string_view s(value);
    return absl::string_view(s.data(), s.size());
  } else {
    return (value);
  }
}
}  // namespace sv_cat_detail

/// absl::StrCat accepting std::string_view too (numbers, strings, char pointers as usual).
template <typename... Args>
std::string sv_cat(const Args&... args) {
  return absl::StrCat(sv_cat_detail::alpha(args)...);
}

/// Joins a range of string-like values with `sep`: {"a", "b"}, ", " -> "a, b".
template <typename Range>
std::string sv_join(const Range& range, std::string_view sep) {
  std::string out;
  bool first = true;
  for (const auto& item : range) {
    if (!first) out.append(sep);
    first = false;
    out.append(std::string_view(item));
  }
  return out;
}

}  // namespace muflow::engine
