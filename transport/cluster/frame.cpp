#include "transport/cluster/frame.hpp"

#include <cstring>

#include "absl/strings/str_format.h"

namespace muflow::transport::cluster {
namespace {

template <class T>
void put_le(char* out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

template <class T>
T get_le(const char* in) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<T>(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}

}  // namespace

void write_frame_prefix(const FramePrefix& prefix,
                        std::span<char, static_cast<size_t>(kFramePrefixBytes)> out) {
  put_le<uint32_t>(out.data() + 0, kFrameMagic);
  put_le<uint16_t>(out.data() + 4, kFrameVersion);
  put_le<uint16_t>(out.data() + 6, prefix.kind);
  put_le<uint32_t>(out.data() + 8, prefix.source);
  put_le<uint32_t>(out.data() + 12, prefix.header_bytes);
  put_le<uint64_t>(out.data() + 16, prefix.payload_bytes);
  put_le<uint64_t>(out.data() + 24, prefix.sequence);
  put_le<uint64_t>(out.data() + 32, prefix.run);
}

std::vector<char> encode_frame_prefix(const FramePrefix& prefix) {
  std::vector<char> out(kFramePrefixBytes, 0);
  write_frame_prefix(prefix, std::span<char, static_cast<size_t>(kFramePrefixBytes)>(out));
  return out;
}

absl::StatusOr<int64_t> frame_message_bytes(int64_t header_bytes, int64_t payload_bytes,
                                            const FrameLimits& limits) {
  if (header_bytes < 0 || header_bytes > limits.max_header_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat("frame: header of %d bytes, expected 0..%d",
                                                      header_bytes, limits.max_header_bytes));
  }
  if (payload_bytes < 0 || payload_bytes > limits.max_payload_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat("frame: payload of %d bytes, expected 0..%d",
                                                      payload_bytes, limits.max_payload_bytes));
  }
  return kFramePrefixBytes + header_bytes + payload_bytes;
}

absl::StatusOr<FrameView> parse_frame(std::span<const char> message, const FrameLimits& limits) {
  if (static_cast<int64_t>(message.size()) < kFramePrefixBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "frame: %d bytes, shorter than the %d-byte prefix", message.size(), kFramePrefixBytes));
  }
  const char* p = message.data();
  const auto magic = get_le<uint32_t>(p + 0);
  if (magic != kFrameMagic) {
    return absl::InvalidArgumentError(
        absl::StrFormat("frame: magic 0x%08x, expected 0x%08x", magic, kFrameMagic));
  }
  const auto version = get_le<uint16_t>(p + 4);
  if (version != kFrameVersion) {
    return absl::InvalidArgumentError(
        absl::StrFormat("frame: version %d, expected %d", version, kFrameVersion));
  }
  FrameView view;
  view.prefix.kind = get_le<uint16_t>(p + 6);
  view.prefix.source = get_le<uint32_t>(p + 8);
  view.prefix.header_bytes = get_le<uint32_t>(p + 12);
  view.prefix.payload_bytes = get_le<uint64_t>(p + 16);
  view.prefix.sequence = get_le<uint64_t>(p + 24);
  view.prefix.run = get_le<uint64_t>(p + 32);
  if (view.prefix.payload_bytes > static_cast<uint64_t>(limits.max_payload_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("frame: payload of %d bytes, expected at most %d",
                        view.prefix.payload_bytes, limits.max_payload_bytes));
  }
  auto total = frame_message_bytes(view.prefix.header_bytes,
                                   static_cast<int64_t>(view.prefix.payload_bytes), limits);
  if (!total.ok()) return total.status();
  if (*total != static_cast<int64_t>(message.size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "frame: message of %d bytes, but its prefix announces %d (%d + header %d + payload %d)",
        message.size(), *total, kFramePrefixBytes, view.prefix.header_bytes,
        view.prefix.payload_bytes));
  }
  view.header = message.subspan(kFramePrefixBytes, view.prefix.header_bytes);
  view.payload = message.subspan(kFramePrefixBytes + view.prefix.header_bytes);
  return view;
}

}  // namespace muflow::transport::cluster
