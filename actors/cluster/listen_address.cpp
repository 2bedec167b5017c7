#include "actors/cluster/listen_address.hpp"

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace muflow::actors::cluster {

absl::StatusOr<ListenAddress> parse_listen_address(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("address \"%s\": expected HOST:PORT, e.g. 127.0.0.1:7101", text));
  }
  uint32_t port = 0;
  if (!absl::SimpleAtoi(absl::string_view(text.data() + colon + 1, text.size() - colon - 1),
                        &port) ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrFormat("address \"%s\": port must be 0..65535", text));
  }
  return ListenAddress{std::string(text.substr(0, colon)), static_cast<uint16_t>(port)};
}

bool is_loopback_host(std::string_view host) {
  return host.starts_with("127.") || host == "localhost" || host == "::1";
}

}  // namespace muflow::actors::cluster
