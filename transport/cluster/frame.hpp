#pragma once
/// \file
/// The frame of one data-plane message between muflow processes (#18): a fixed 40-byte
/// prefix, then a header, then a raw payload, all in one UCX tagged message. What the header
/// and payload hold depends on the frame's kind (a token batch: `token_batch_wire.hpp`'s two
/// buffers). A receiver trusts nothing: `parse_frame` checks the prefix against the message's
/// length and the limits before any byte of the body is used.
///
/// Prefix layout (little-endian, byte offsets):
///
/// | offset | bytes | field |
/// |---|---|---|
/// | 0 | 4 | magic `kFrameMagic` ("MFDP" as a big-endian integer) |
/// | 4 | 2 | version `kFrameVersion` |
/// | 6 | 2 | kind (the runtime's message kind; opaque here) |
/// | 8 | 4 | source process (cluster index of the sender; 0 = driver) |
/// | 12 | 4 | header bytes |
/// | 16 | 8 | payload bytes |
/// | 24 | 8 | sequence (per sender and destination, from 0; lets a receiver spot loss) |
/// | 32 | 8 | run (the driver's number of the run attempt the frame belongs to; 0: none) |
///
/// Version 2 added `run`: a receiver drops an actor message of another run than the one it
/// hosts (a straggler of an attempt that failed when a worker was lost, which would otherwise
/// reach the next attempt's actors under the same addresses).
///
/// No UCX and no CAF here: the format is plain bytes, so tests and fuzzers use it alone.

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace muflow::transport::cluster {

inline constexpr uint32_t kFrameMagic = 0x4d464450u;  ///< "MFDP"
inline constexpr uint16_t kFrameVersion = 2;
inline constexpr int64_t kFramePrefixBytes = 40;

/// The fields of a frame's prefix.
struct FramePrefix {
  uint16_t kind = 0;
  uint32_t source = 0;  ///< sender's process index in the cluster
  uint32_t header_bytes = 0;
  uint64_t payload_bytes = 0;
  uint64_t sequence = 0;
  /// the run attempt (ClusterDriver's number, sent with cl_setup); 0 outside a run (pings)
  uint64_t run = 0;
};

/// Bounds a receiver enforces on a frame (bytes). The defaults fit a token batch of the
/// largest model muflow loads; a runtime tightens them from its model.
struct FrameLimits {
  int64_t max_header_bytes = int64_t{64} << 20;  ///< 64 MiB
  int64_t max_payload_bytes = int64_t{2} << 30;  ///< 2 GiB
};

/// A parsed frame: views into the message it was parsed from (valid while that lives).
struct FrameView {
  FramePrefix prefix;
  std::span<const char> header;
  std::span<const char> payload;
};

/// The 40 prefix bytes of a frame with `prefix`'s fields (magic and version filled in).
/// Pure; any thread.
std::vector<char> encode_frame_prefix(const FramePrefix& prefix);

/// The same 40 bytes written at `out` (the front of a buffer that holds the whole frame, so
/// that it is sent as one contiguous message). Any thread.
void write_frame_prefix(const FramePrefix& prefix,
                        std::span<char, static_cast<size_t>(kFramePrefixBytes)> out);

/// Total message bytes of a frame with `header_bytes` and `payload_bytes`, or
/// absl::InvalidArgument when either exceeds `limits`. Pure; any thread.
absl::StatusOr<int64_t> frame_message_bytes(int64_t header_bytes, int64_t payload_bytes,
                                            const FrameLimits& limits = {});

/// Parses one received message. Errors (absl::InvalidArgument, naming the field): fewer than
/// 40 bytes, wrong magic or version, header or payload bytes above `limits`, or a message
/// length other than 40 + header + payload (truncated or trailing bytes). Never reads outside
/// `message`; allocates nothing. Pure; any thread.
absl::StatusOr<FrameView> parse_frame(std::span<const char> message,
                                      const FrameLimits& limits = {});

}  // namespace muflow::transport::cluster
