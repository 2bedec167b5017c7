#pragma once
/// \file
/// The server address `muflow bench --url` takes: `http[s]://HOST[:PORT][/PREFIX]`.

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace muflow::http::client {

/// Where an OpenAI-compatible server listens. Plain value.
struct BaseUrl {
  std::string scheme;       ///< "http" or "https"
  std::string host;         ///< name or address; an IPv6 address keeps its brackets "[::1]"
  int port = 80;            ///< 1..65535; default 80 (http) / 443 (https)
  std::string path_prefix;  ///< "" or "/a/b" (no trailing '/'); endpoints are appended to it

  /// "scheme://host:port" (what httplib::Client takes).
  std::string origin() const;
  /// origin() + path_prefix: the URL as given, normalised (for messages and reports).
  std::string text() const;
};

/// Parses `url`. A trailing "/" and a trailing "/v1" of the path are dropped (so
/// "http://h:8000/v1" and "http://h:8000" name the same server: endpoints are "/v1/...").
/// Errors: InvalidArgument naming the URL and what is wrong: a scheme other than http/https
/// (or none), an empty host, a port that is not a number in [1, 65535], user info
/// ("user@host"), a query or fragment, spaces or control characters. Pure; any thread.
absl::StatusOr<BaseUrl> parse_base_url(std::string_view url);

}  // namespace muflow::http::client
