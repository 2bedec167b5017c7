#include "http/client/base_url.hpp"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace muflow::http::client {
namespace {

absl::Status bad(absl::string_view url, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("URL '", url, "': ", what,
                   " (expected http://HOST[:PORT][/PATH], e.g. http://127.0.0.1:8000)"));
}

}  // namespace

std::string BaseUrl::origin() const { return absl::StrCat(scheme, "://", host, ":", port); }

std::string BaseUrl::text() const { return origin() + path_prefix; }

absl::StatusOr<BaseUrl> parse_base_url(std::string_view url_text) {
  // Debian's Abseil has its own string_view type.
  const absl::string_view url(url_text.data(), url_text.size());
  for (char c : url) {
    if (std::iscntrl(static_cast<unsigned char>(c)) || c == ' ') {
      return bad(url, "contains a space or control character");
    }
  }
  BaseUrl out;
  const size_t sep = url.find("://");
  if (sep == absl::string_view::npos) return bad(url, "no scheme");
  out.scheme = absl::AsciiStrToLower(url.substr(0, sep));
  if (out.scheme != "http" && out.scheme != "https") {
    return bad(url, absl::StrCat("scheme '", out.scheme, "' is not http or https"));
  }
  out.port = out.scheme == "https" ? 443 : 80;
  absl::string_view rest = url.substr(sep + 3);
  if (rest.find_first_of("?#") != absl::string_view::npos) {
    return bad(url, "a query or fragment is not allowed");
  }
  const size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  absl::string_view path = slash == absl::string_view::npos ? "" : rest.substr(slash);
  if (authority.find('@') != absl::string_view::npos) {
    return bad(url, "user info (user@host) is not supported; use --api-key");
  }
  absl::string_view port_text;
  if (absl::StartsWith(authority, "[")) {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return bad(url, "unterminated '[' in the host");
    out.host = std::string(authority.substr(0, close + 1));
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad(url, "unexpected text after ']'");
      port_text = after.substr(1);
      if (port_text.empty()) return bad(url, "empty port");
    }
    if (out.host.size() <= 2) return bad(url, "empty host");
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != absl::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return bad(url, "empty port");
    }
    if (out.host.empty()) return bad(url, "empty host");
    if (out.host.find(':') != std::string::npos) {
      return bad(url, "an IPv6 host must be written in brackets, e.g. http://[::1]:8000");
    }
  }
  if (!port_text.empty()) {
    int port = 0;
    if (!absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535 ||
        port_text.front() == '+' || port_text.front() == '-') {
      return bad(url, absl::StrCat("port '", port_text, "' is not a number in [1, 65535]"));
    }
    out.port = port;
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (absl::EndsWith(path, "/v1")) path.remove_suffix(3);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  out.path_prefix = std::string(path);
  return out;
}

}  // namespace muflow::http::client
