#pragma once
/// \file
/// `HOST:PORT` of a muflow worker (`muflow worker --listen`, `[[cluster.workers]] address`).

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace muflow::actors::cluster {

struct ListenAddress {
  std::string host;   ///< IPv4 address or host name, never empty
  uint16_t port = 0;  ///< 0 = any free port (a listener reports the one it got)
};

/// Parses `HOST:PORT` (PORT 0..65535). Errors (InvalidArgument) quote the text and say what
/// was expected. Pure.
absl::StatusOr<ListenAddress> parse_listen_address(std::string_view text);

/// True for the loopback host names a worker may bind without `--allow-remote`: 127.x.y.z,
/// "localhost", "::1". Pure.
bool is_loopback_host(std::string_view host);

}  // namespace muflow::actors::cluster
