#pragma once
/// \file
/// The wire form of an `engine::dataflow::TokenBatch`, for channels that cross a process boundary
/// (UCX data plane; ARCHITECTURE.md §4 and invariant 4: control through CAF, tensors never).
///
/// A batch travels as two byte buffers:
/// - **header**: CAF 0.17 `binary_serializer` output of a `TokenBatchWireHeader`, then
///   `num_tokens` `TokenMeta` records, then `num_segments` `ExpertSegment` records, through the
///   `inspect()` overloads below. Integers are fixed width in network byte order (CAF), so
///   every record has one size: the header's length follows from its counts.
/// - **payload**: the activation rows `[num_rows, width]`, row-major, raw (not through CAF's
///   serializer), little-endian, as f32 (4 bytes per value, bit-exact) or bf16 (2 bytes per
///   value: the upper half of the f32 after round-to-nearest-even, `kernels/cpu/bf16.hpp`).
///   Decoding widens bf16 to f32 exactly (`engine::dataflow::Activations` hold f32).
///
/// The header is small (39 bytes per token, 20 per segment, 57 fixed) and can go out as an
/// eager message while the payload uses a zero-copy rendezvous; `wire_payload_bytes` tells a
/// receiver how large a buffer to post before the payload arrives.
///
/// This header includes only `caf/meta/type_name.hpp` from CAF; the serializers themselves are
/// instantiated in `token_batch_wire.cpp`.

#include <bit>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "caf/meta/type_name.hpp"
#include "engine/dataflow/token_batch.hpp"

namespace muflow::engine::dataflow {

/// CAF 0.17 inspection of a `LayerId`: `kind` as its underlying `int8_t`, then `block`,
/// `index`. A loading inspector stores whatever integer it read into `kind`; range checks are
/// the caller's (`transport::decode_token_batch` does them). Any thread.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, LayerId& x) {
  auto kind = static_cast<std::underlying_type_t<StageKind>>(x.kind);
  auto result = f(caf::meta::type_name("LayerId"), kind, x.block, x.index);
  if constexpr (Inspector::writes_state) x.kind = static_cast<StageKind>(kind);
  return result;
}

/// CAF 0.17 inspection of a `TokenMeta`, fields in the wire order (request_id, position,
/// token_id, origin_rank, topk_rank, topk_weight, flags, wave: not the declaration order, which
/// is packed for size; changing either leaves the other as it is). `topk_weight` travels
/// as its IEEE-754 bit pattern (`uint32_t`), so it round-trips bit for bit: CAF 0.17's own
/// float packing turns -0 into +0, mangles subnormals and NaN payloads, and never returns
/// on ±inf. Any thread.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenMeta& x) {
  auto weight_bits = std::bit_cast<uint32_t>(x.topk_weight);
  auto result = f(caf::meta::type_name("TokenMeta"), x.request_id, x.position, x.token_id,
                  x.origin_rank, x.topk_rank, weight_bits, x.flags, x.wave);
  if constexpr (Inspector::writes_state) x.topk_weight = std::bit_cast<float>(weight_bits);
  return result;
}

/// CAF 0.17 inspection of an `ExpertSegment`: `expert`, `begin`, `end`. Any thread.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ExpertSegment& x) {
  return f(caf::meta::type_name("ExpertSegment"), x.expert, x.begin, x.end);
}

}  // namespace muflow::engine::dataflow

namespace muflow::transport {

/// Element type of the activation payload on the wire.
enum class WireDType : uint8_t {
  kNone = 0,  ///< no activations (`TokenBatch::act` null, e.g. simulation); empty payload
  kF32 = 1,   ///< IEEE-754 binary32, 4 bytes per value, bit-exact round trip
  kBf16 = 2,  ///< bfloat16, 2 bytes per value; encoding rounds to nearest even
};

/// Bytes per activation value of `dtype`: 0 (kNone), 4 (kF32), 2 (kBf16); -1 for a value
/// outside the enum. Any thread.
int64_t wire_dtype_bytes(WireDType dtype);

/// "none", "f32", "bf16", or "invalid". Any thread.
const char* wire_dtype_name(WireDType dtype);

/// First field of every header: "MFWB" read as a big-endian integer.
inline constexpr uint32_t kTokenBatchWireMagic = 0x4d465742u;
/// Wire format version; a decoder rejects any other (no compatibility promise yet).
inline constexpr uint16_t kTokenBatchWireVersion = 1;

/// The fixed part of a wire header (57 bytes serialized). Counts come first so a decoder
/// can bound every allocation before it makes one.
struct TokenBatchWireHeader {
  uint32_t magic = kTokenBatchWireMagic;
  uint16_t version = kTokenBatchWireVersion;
  engine::dataflow::LayerId layer;  ///< destination layer
  engine::dataflow::Payload payload = engine::dataflow::Payload::kTokenIds;
  int64_t iteration = 0;               ///< coordinator's iteration number
  WireDType dtype = WireDType::kNone;  ///< payload element type
  int64_t num_tokens = 0;              ///< TokenMeta records that follow
  int64_t num_rows = 0;                ///< activation rows; 0 when dtype is kNone
  int64_t width = 0;                   ///< values per row; 0 when dtype is kNone
  int64_t num_segments = 0;            ///< ExpertSegment records after the tokens
};

/// CAF 0.17 inspection of the fixed header, fields in declaration order, enums as their
/// underlying integers (unchecked when loading, see `decode_token_batch`). Any thread.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenBatchWireHeader& x) {
  auto payload = static_cast<std::underlying_type_t<engine::dataflow::Payload>>(x.payload);
  auto dtype = static_cast<std::underlying_type_t<WireDType>>(x.dtype);
  auto result = f(caf::meta::type_name("TokenBatchWireHeader"), x.magic, x.version, x.layer,
                  payload, x.iteration, dtype, x.num_tokens, x.num_rows, x.width, x.num_segments);
  if constexpr (Inspector::writes_state) {
    x.payload = static_cast<engine::dataflow::Payload>(payload);
    x.dtype = static_cast<WireDType>(dtype);
  }
  return result;
}

/// Bounds a decoder enforces on values read from the wire before it allocates anything
/// (counts, values, bytes). A decode allocates at most `max_payload_bytes` of f32 rows (twice
/// that for a bf16 payload, widened) plus `max_tokens` TokenMeta and `max_segments`
/// ExpertSegment records. The defaults are generous; a channel should tighten them from its
/// model (hidden size, batch limits).
struct WireLimits {
  int64_t max_tokens = int64_t{1} << 20;         ///< TokenMeta records (= activation rows)
  int64_t max_width = int64_t{1} << 18;          ///< values per activation row
  int64_t max_segments = int64_t{1} << 16;       ///< ExpertSegment records
  int64_t max_payload_bytes = int64_t{1} << 31;  ///< num_rows * width * dtype bytes
};

/// An encoded batch. Owns its bytes; a plain value (copy or move it to any thread).
struct WireBatch {
  std::vector<char> header;            ///< CAF-serialized header + token and segment records
  std::vector<char> payload;           ///< raw activation rows; empty when dtype is kNone
  WireDType dtype = WireDType::kNone;  ///< also recorded in the header
};

/// Encodes `batch` for the wire, its activations (if any) as `dtype`.
///
/// - `batch.act` null: the result has `dtype` kNone and an empty payload, whatever `dtype`
///   was asked for; it decodes to a batch with null `act`.
/// - `batch.act` set: `dtype` must be kF32 (payload `num_rows * width * 4` bytes, bit-exact)
///   or kBf16 (`num_rows * width * 2` bytes, each value `kernels::cpu::f32_to_bf16`).
///
/// Errors (absl::InvalidArgument, naming the field): `dtype` kNone or out of range while
/// `batch.act` is set (that would drop the rows), `act->num_rows != tokens.size()`,
/// `act->data.size() != num_rows * width`, negative width, `layer.kind` or `payload` outside
/// its enum, segments that do not cover the rows in order (same rule as the decoder).
/// Reads `batch` and `*batch.act` only; callable from any thread while no one writes them.
absl::StatusOr<WireBatch> encode_token_batch(const engine::dataflow::TokenBatch& batch,
                                             WireDType dtype);

/// An encoded f32 batch whose payload is a view of the batch's own activation rows.
struct WireBatchView {
  std::vector<char> header;            ///< as WireBatch::header
  std::span<const char> payload;       ///< `batch.act->data`'s bytes; empty when dtype is kNone
  WireDType dtype = WireDType::kNone;  ///< kF32, or kNone for a batch without activations
};

/// `encode_token_batch(batch, WireDType::kF32)` without copying the rows: the same header,
/// and as payload a view of `batch.act->data` (f32 rows are sent as they are), valid while
/// that array lives unchanged. For a sender that writes the message into its own buffer
/// (the data plane's frames: one copy of the rows instead of one per layer of framing).
/// Errors: as `encode_token_batch`. Any thread while no one writes `batch`.
absl::StatusOr<WireBatchView> encode_token_batch_f32_view(
    const engine::dataflow::TokenBatch& batch);

/// Parses and checks a header alone and returns the payload size in bytes it announces
/// (`num_rows * width * wire_dtype_bytes(dtype)`), so a receiver can post a buffer of exactly
/// that size before the payload arrives. Runs every header check of `decode_token_batch`
/// except those on the records' contents (segment order). Errors: as `decode_token_batch`.
/// Allocates nothing; any thread.
absl::StatusOr<int64_t> wire_payload_bytes(std::span<const char> header,
                                           const WireLimits& limits = {});

/// Decodes a batch from its header and payload bytes, trusting neither.
///
/// Checks, all before any allocation sized from the wire, and each failing with
/// absl::InvalidArgument naming what was wrong: the header holds at least the fixed part,
/// magic and version match, `layer.kind`, `payload` and `dtype` are inside their enums,
/// `num_tokens <= limits.max_tokens`, `num_segments <= limits.max_segments`,
/// `width <= limits.max_width` (all >= 0), `num_rows == num_tokens` (or `num_rows == width
/// == 0` for kNone), the header's length is exactly the fixed part plus the records its
/// counts announce (truncated or trailing bytes are errors), `num_rows * width * elem bytes <=
/// limits.max_payload_bytes` and equals `payload.size()`. Then the records: segments must
/// be non-empty, contiguous from row 0 to `num_rows` (`num_tokens` without activations), in
/// strictly ascending expert order with expert ids >= 0. Never reads outside either span.
///
/// Returns a new batch (sole owner: the caller) whose `act` is null for kNone and otherwise
/// `[num_rows, width]` f32 (bf16 values widened exactly). Pure; any thread.
absl::StatusOr<engine::dataflow::TokenBatchPtr> decode_token_batch(std::span<const char> header,
                                                                   std::span<const char> payload,
                                                                   const WireLimits& limits = {});

/// `decode_token_batch(wire.header, wire.payload, limits)`; `wire.dtype` is not consulted
/// (the header's dtype is authoritative).
absl::StatusOr<engine::dataflow::TokenBatchPtr> decode_token_batch(const WireBatch& wire,
                                                                   const WireLimits& limits = {});

}  // namespace muflow::transport
