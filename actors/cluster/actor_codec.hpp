#pragma once
/// \file
/// The data-plane form of the messages muflow's actors send each other across processes
/// (#18): a `FrameKind::kActorMessage` frame's header and payload. Tensors (activations,
/// logits, K/V rows) travel raw in the payload, bit for bit; everything else (addresses,
/// counts, token metadata) goes through CAF 0.17's `binary_serializer` in the header, never
/// CAF's message serializer (invariant 4, ARCHITECTURE.md §8).
///
/// Header: the destination (`ActorAddress`: role u8, block i32, index i32), a `MessageTag`
/// (u8), then the tag's fields:
/// - kBatch `(batch, TokenBatchPtr)`: u32 length + the token batch's wire header
///   (transport/token_batch_wire.hpp, activations as f32); payload: its rows.
/// - kContribution `(contrib, ContributionPtr)`: iteration i64, source i32, parts u32, per part
///   (dest i32, header bytes u32, payload bytes u64), then the parts' wire headers back to
///   back; payload: the parts' rows back to back.
/// - kContributionBundle `(contrib, ContributionBundlePtr)`: count u32, then each
///   contribution's header fields as kContribution's; payload: their rows back to back, in
///   that order.
/// - kSampled `(sampled, SampledBatchPtr)`: iteration i64, rank i32, rows u32, requests u32,
///   per row (request i64, position i64, token i32, logits u32), the request ids (i64 each);
///   payload: every row's logits (f32) back to back.
/// - kKvRows `(kvrows, KvRowsPtr)`: width i64, rows u32, per row (request i64, position i64);
///   payload: K `[rows, width]` then V `[rows, width]`, f32.
/// - kBusy `(busy, device i64, begin f64, end f64)`, kFetch `(fetch, i64, i64, f64)`: doubles
///   as their IEEE-754 bits (u64); kRelease `(release, request i64)`; kFailed
///   `(failed, text)`: u32 length + bytes.
/// - kReports `(reports, std::vector<caf::message>)`, for the coordinator: several reports of
///   one process in one frame (Outbox batches them): count u32, then per report u32 length +
///   its own header (address, tag, fields), each a kBusy, kFetch, kRows, kLoad or kLayer for
///   the coordinator; no payload.
/// - A barrier's metrics, from its primary replica to the coordinator (collective.hpp):
///   kRows `(a2arows, dispatch bool, remote i64, rows i64)`: the bool as a u8 (0 or 1);
///   kLoad `(load, block i64, iteration i64, tokens per device [u32 count, i64 each], done
///   f64, rebalanced i64)`; kLayer `(layer, block i64, iteration i64, done f64, finish per
///   device [u32 count, f64 each])`. (`a2a`, the sim's timed all-to-all, never crosses.)
///
/// Any other message has no wire form (encode returns Unimplemented): what crosses a process
/// boundary is exactly this list.

#include <caf/fwd.hpp>
#include <caf/message.hpp>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/process_layout.hpp"
#include "transport/token_batch_wire.hpp"

namespace muflow::actors::cluster {

/// Which message a frame carries. Part of the wire format: never reuse a number.
enum class MessageTag : uint8_t {
  kBatch = 1,
  kContribution = 2,
  kSampled = 3,
  kKvRows = 4,
  kBusy = 5,
  kFetch = 6,
  kRelease = 7,
  kFailed = 8,
  kRows = 9,
  kLoad = 10,
  kLayer = 11,
  kContributionBundle = 12,
  kReports = 13,
};

/// The atom of a kReports message: `(reports, std::vector<caf::message>)`, each element a
/// report for the coordinator (busy, fetch, a2arows, load, layer), in the order they were
/// made. `deliver_actor_frame` delivers them one by one.
using reports_atom = caf::atom_constant<caf::atom("reports")>;

/// True for a message the coordinator takes as a report (metrics, not on any run's critical
/// path): busy, fetch, a2arows, load, layer. An Outbox may hold these back and batch them.
bool is_report(const caf::type_erased_tuple& content);

/// Bounds a decoder enforces before it allocates anything sized from the wire; a run sets
/// them from its model (`limits_for`).
struct ActorMessageLimits {
  transport::WireLimits batch;                ///< each token batch (alone or a contribution's part)
  int64_t max_parts = int64_t{1} << 16;       ///< parts of a contribution
  int64_t max_rows = int64_t{1} << 20;        ///< sampled rows, K/V rows
  int64_t max_logits = int64_t{1} << 22;      ///< logits of one sampled row (the vocabulary)
  int64_t max_kv_width = int64_t{1} << 18;    ///< floats per K (and V) row
  int64_t max_text_bytes = int64_t{1} << 16;  ///< a failure's message
  int64_t max_devices = int64_t{1} << 16;     ///< entries of a per-device metric
};

/// An encoded message: the frame's header and payload (concatenated after the frame prefix).
struct EncodedMessage {
  std::vector<char> header;
  std::vector<char> payload;
};

/// Encodes `content` (a message sent to the actor at `to`) for the data plane.
/// Errors: Unimplemented for a message outside the list above; InvalidArgument for a null
/// pointer payload or a token batch `encode_token_batch` refuses. Reads `content` only; any
/// thread.
absl::StatusOr<EncodedMessage> encode_actor_message(const ActorAddress& to,
                                                    const caf::type_erased_tuple& content);

/// `encode_actor_message` written into one buffer, as the data plane sends it: `front` bytes
/// left for the caller (zero; a frame prefix goes there), then the header, then the payload.
/// Each activation row, logit and K/V value is copied once, from the message's own arrays,
/// into `bytes` (encode_actor_message copies them into its payload the same way).
struct EncodedFrame {
  std::vector<char> bytes;     ///< front + header_bytes + payload_bytes
  size_t header_bytes = 0;     ///< after the `front` bytes
  uint64_t payload_bytes = 0;  ///< after the header
};

/// Encodes `content` as `encode_actor_message` does (same header and payload bytes, same
/// errors), into one buffer after `front` bytes. Reads `content` only; any thread.
absl::StatusOr<EncodedFrame> encode_actor_frame(const ActorAddress& to,
                                                const caf::type_erased_tuple& content,
                                                size_t front);

/// A decoded message and where it goes.
struct DecodedMessage {
  ActorAddress to;
  caf::message message;
};

/// Decodes a frame's header and payload, trusting neither: every count is checked against
/// `limits` and against the bytes that hold it before anything is allocated, the header must
/// be consumed exactly, and the payload's length must equal what the header announces.
/// Errors: InvalidArgument naming what was wrong. Never reads outside either span; any thread.
absl::StatusOr<DecodedMessage> decode_actor_message(std::span<const char> header,
                                                    std::span<const char> payload,
                                                    const ActorMessageLimits& limits = {});

}  // namespace muflow::actors::cluster
