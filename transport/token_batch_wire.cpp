#include "transport/token_batch_wire.hpp"

#include <bit>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "caf/binary_deserializer.hpp"
#include "caf/binary_serializer.hpp"
#include "caf/error.hpp"
#include "kernels/cpu/bf16.hpp"

namespace muflow::transport {
namespace {

using engine::dataflow::ExpertSegment;
using engine::dataflow::TokenBatch;
using engine::dataflow::TokenMeta;

// The payload is raw host memory; the format says little-endian.
static_assert(std::endian::native == std::endian::little,
              "token batch wire payload is little-endian; add a byte swap for this target");

// Serialized size of a default-constructed T. Every field is fixed width in CAF's binary
// format, so this is the size of every T.
template <class T>
int64_t serialized_bytes() {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  T value{};
  (void)sink(value);
  return static_cast<int64_t>(buf.size());
}

struct RecordSizes {
  int64_t header = serialized_bytes<TokenBatchWireHeader>();
  int64_t token = serialized_bytes<TokenMeta>();
  int64_t segment = serialized_bytes<ExpertSegment>();
};

const RecordSizes& record_sizes() {
  static const RecordSizes sizes;
  return sizes;
}

bool valid_stage_kind(engine::dataflow::StageKind kind) {
  const auto v = static_cast<int>(kind);
  return v >= static_cast<int>(engine::dataflow::StageKind::kAttention) &&
         v <= static_cast<int>(engine::dataflow::StageKind::kSampler);
}

bool valid_payload(engine::dataflow::Payload payload) {
  const auto v = static_cast<int>(payload);
  return v >= static_cast<int>(engine::dataflow::Payload::kTokenIds) &&
         v <= static_cast<int>(engine::dataflow::Payload::kExpertOutputs);
}

// a * b * c without overflow; nullopt-like false on overflow. All inputs >= 0.
bool checked_product(int64_t a, int64_t b, int64_t c, int64_t* out) {
  int64_t ab = 0;
  return !__builtin_mul_overflow(a, b, &ab) && !__builtin_mul_overflow(ab, c, out);
}

std::string caf_error_text(const caf::error& err) { return caf::to_string(err); }

// Segments must cover rows [0, num_rows) once, contiguous, non-empty, strictly ascending
// expert ids >= 0 (engine/dataflow/token_batch.hpp; engine/dataflow/expert_dispatch.cpp builds them so).
absl::Status check_segments(const std::vector<ExpertSegment>& segments, int64_t num_rows,
                            const char* who) {
  if (segments.empty()) return absl::OkStatus();
  int64_t next_row = 0;
  int32_t prev_expert = -1;
  for (size_t i = 0; i < segments.size(); ++i) {
    const ExpertSegment& s = segments[i];
    if (s.expert < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: segment %d has expert %d (must be >= 0)", who, i, s.expert));
    }
    if (i > 0 && s.expert <= prev_expert) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: segment %d is for expert %d after expert %d (experts must ascend strictly)", who, i,
          s.expert, prev_expert));
    }
    if (s.begin != next_row) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: segment %d (expert %d) begins at row %d, expected %d (segments must cover the "
          "rows contiguously from row 0)",
          who, i, s.expert, s.begin, next_row));
    }
    if (s.end <= s.begin || s.end > num_rows) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: segment %d (expert %d) is rows [%d, %d); must be non-empty and "
                          "end at most at row %d",
                          who, i, s.expert, s.begin, s.end, num_rows));
    }
    next_row = s.end;
    prev_expert = s.expert;
  }
  if (next_row != num_rows) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: segments cover rows [0, %d) of %d (they must cover every row)", who,
                        next_row, num_rows));
  }
  return absl::OkStatus();
}

// A header whose fixed part and sizes passed every check.
struct ParsedHeader {
  TokenBatchWireHeader fixed;
  int64_t payload_bytes = 0;
};

// Reads the fixed part from `source` and checks it against `header_size` and `limits`.
absl::StatusOr<ParsedHeader> parse_fixed_header(caf::binary_deserializer& source,
                                                int64_t header_size, const WireLimits& limits) {
  constexpr const char* kWho = "token batch wire header";
  const RecordSizes& sizes = record_sizes();
  if (header_size < sizes.header) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: truncated: %d bytes, the fixed part alone is %d", kWho, header_size, sizes.header));
  }
  ParsedHeader parsed;
  TokenBatchWireHeader& h = parsed.fixed;
  if (caf::error err = source(h)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: cannot read the fixed part: %s", kWho, caf_error_text(err)));
  }
  if (h.magic != kTokenBatchWireMagic) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: magic is 0x%08x, expected 0x%08x (not a token batch header)", kWho,
                        h.magic, kTokenBatchWireMagic));
  }
  if (h.version != kTokenBatchWireVersion) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: version %d, this build reads version %d",
                                                      kWho, h.version, kTokenBatchWireVersion));
  }
  if (!valid_stage_kind(h.layer.kind)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: layer.kind = %d is not a StageKind (0..2)", kWho, static_cast<int>(h.layer.kind)));
  }
  if (!valid_payload(h.payload)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: payload = %d is not a Payload (0..3)",
                                                      kWho, static_cast<int>(h.payload)));
  }
  const int64_t elem_bytes = wire_dtype_bytes(h.dtype);
  if (elem_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: dtype = %d is not a WireDType (0 none, 1 f32, 2 bf16)", kWho,
                        static_cast<int>(h.dtype)));
  }
  if (h.num_tokens < 0 || h.num_tokens > limits.max_tokens) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: num_tokens = %d is outside [0, %d] (WireLimits::max_tokens)", kWho,
                        h.num_tokens, limits.max_tokens));
  }
  if (h.num_segments < 0 || h.num_segments > limits.max_segments) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: num_segments = %d is outside [0, %d] (WireLimits::max_segments)", kWho,
                        h.num_segments, limits.max_segments));
  }
  if (h.width < 0 || h.width > limits.max_width) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: width = %d is outside [0, %d] (WireLimits::max_width)", kWho, h.width,
                        limits.max_width));
  }
  if (h.dtype == WireDType::kNone) {
    if (h.num_rows != 0 || h.width != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: dtype none (no activations) but num_rows = %d, width = %d (both must be 0)", kWho,
          h.num_rows, h.width));
    }
  } else if (h.num_rows != h.num_tokens) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: num_rows = %d but num_tokens = %d (one activation row per token)",
                        kWho, h.num_rows, h.num_tokens));
  }
  // Counts are bounded by the limits, but the limits are the caller's: check the arithmetic.
  int64_t token_bytes = 0;
  int64_t segment_bytes = 0;
  int64_t record_bytes = 0;
  if (__builtin_mul_overflow(h.num_tokens, sizes.token, &token_bytes) ||
      __builtin_mul_overflow(h.num_segments, sizes.segment, &segment_bytes) ||
      __builtin_add_overflow(token_bytes, segment_bytes, &record_bytes)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %d tokens and %d segments overflow a byte count", kWho, h.num_tokens, h.num_segments));
  }
  const int64_t have = header_size - sizes.header;
  if (have < record_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: truncated: %d tokens (%d bytes each) and %d segments (%d bytes each) need %d "
        "bytes after the fixed part, %d present",
        kWho, h.num_tokens, sizes.token, h.num_segments, sizes.segment, record_bytes, have));
  }
  if (have > record_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %d trailing bytes after %d tokens and %d segments", kWho,
                        have - record_bytes, h.num_tokens, h.num_segments));
  }
  if (!checked_product(h.num_rows, h.width, elem_bytes, &parsed.payload_bytes) ||
      parsed.payload_bytes > limits.max_payload_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: payload of %d rows x %d values x %d bytes (%s) exceeds %d bytes "
        "(WireLimits::max_payload_bytes)",
        kWho, h.num_rows, h.width, elem_bytes, wire_dtype_name(h.dtype), limits.max_payload_bytes));
  }
  return parsed;
}

}  // namespace

int64_t wire_dtype_bytes(WireDType dtype) {
  switch (dtype) {
    case WireDType::kNone:
      return 0;
    case WireDType::kF32:
      return 4;
    case WireDType::kBf16:
      return 2;
  }
  return -1;
}

const char* wire_dtype_name(WireDType dtype) {
  switch (dtype) {
    case WireDType::kNone:
      return "none";
    case WireDType::kF32:
      return "f32";
    case WireDType::kBf16:
      return "bf16";
  }
  return "invalid";
}

namespace {

// encode_token_batch's header, and its activation values (not converted or copied).
struct EncodedHeader {
  std::vector<char> header;
  std::span<const float> values;
  WireDType dtype = WireDType::kNone;
};

absl::StatusOr<EncodedHeader> encode_header(const engine::dataflow::TokenBatch& batch,
                                            WireDType dtype) {
  constexpr const char* kWho = "encode_token_batch";
  if (!valid_stage_kind(batch.layer.kind)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: layer.kind = %d is not a StageKind",
                                                      kWho, static_cast<int>(batch.layer.kind)));
  }
  if (!valid_payload(batch.payload)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: payload = %d is not a Payload", kWho,
                                                      static_cast<int>(batch.payload)));
  }
  const int64_t num_tokens = batch.num_tokens();
  TokenBatchWireHeader h;
  h.layer = batch.layer;
  h.payload = batch.payload;
  h.iteration = batch.iteration;
  h.num_tokens = num_tokens;
  h.num_segments = static_cast<int64_t>(batch.segments.size());
  const engine::dataflow::Activations* act = batch.act.get();
  int64_t num_values = 0;
  if (act != nullptr) {
    if (dtype != WireDType::kF32 && dtype != WireDType::kBf16) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: dtype %s (%d) for a batch with activations: must be f32 or bf16",
                          kWho, wire_dtype_name(dtype), static_cast<int>(dtype)));
    }
    if (act->num_rows != num_tokens) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: act->num_rows = %d but the batch has %d tokens", kWho, act->num_rows, num_tokens));
    }
    if (act->width < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: act->width = %d is negative", kWho, act->width));
    }
    if (!checked_product(act->num_rows, act->width, 1, &num_values) ||
        num_values != static_cast<int64_t>(act->data.size())) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: act->data holds %d values, num_rows * width = %d * %d", kWho,
                          act->data.size(), act->num_rows, act->width));
    }
    h.dtype = dtype;
    h.num_rows = act->num_rows;
    h.width = act->width;
  }
  if (absl::Status s = check_segments(batch.segments, num_tokens, kWho); !s.ok()) return s;

  const RecordSizes& sizes = record_sizes();
  EncodedHeader out;
  out.dtype = h.dtype;
  out.header.reserve(static_cast<size_t>(sizes.header + num_tokens * sizes.token +
                                         h.num_segments * sizes.segment));
  caf::binary_serializer sink{nullptr, out.header};
  caf::error err = sink(h);
  for (size_t i = 0; !err && i < batch.tokens.size(); ++i) err = sink(batch.tokens[i]);
  for (size_t i = 0; !err && i < batch.segments.size(); ++i) err = sink(batch.segments[i]);
  if (err) {
    return absl::InternalError(
        absl::StrFormat("%s: CAF serializer failed: %s", kWho, caf_error_text(err)));
  }
  if (act != nullptr) out.values = {act->data.data(), static_cast<size_t>(num_values)};
  return out;
}

}  // namespace

absl::StatusOr<WireBatch> encode_token_batch(const engine::dataflow::TokenBatch& batch,
                                             WireDType dtype) {
  absl::StatusOr<EncodedHeader> e = encode_header(batch, dtype);
  if (!e.ok()) return e.status();
  WireBatch out;
  out.header = std::move(e->header);
  out.dtype = e->dtype;
  const std::span<const float> values = e->values;
  if (values.empty()) return out;
  if (out.dtype == WireDType::kF32) {
    const auto* bytes = reinterpret_cast<const char*>(values.data());
    out.payload.assign(bytes, bytes + values.size_bytes());
  } else {
    out.payload.resize(values.size() * sizeof(uint16_t));
    char* dst = out.payload.data();
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t bits = kernels::cpu::f32_to_bf16(values[i]);
      std::memcpy(dst + i * sizeof(uint16_t), &bits, sizeof(bits));
    }
  }
  return out;
}

absl::StatusOr<WireBatchView> encode_token_batch_f32_view(
    const engine::dataflow::TokenBatch& batch) {
  absl::StatusOr<EncodedHeader> e = encode_header(batch, WireDType::kF32);
  if (!e.ok()) return e.status();
  WireBatchView out;
  out.header = std::move(e->header);
  out.dtype = e->dtype;
  out.payload = {reinterpret_cast<const char*>(e->values.data()), e->values.size_bytes()};
  return out;
}

absl::StatusOr<int64_t> wire_payload_bytes(std::span<const char> header, const WireLimits& limits) {
  caf::binary_deserializer source{nullptr, header.data(), header.size()};
  absl::StatusOr<ParsedHeader> parsed =
      parse_fixed_header(source, static_cast<int64_t>(header.size()), limits);
  if (!parsed.ok()) return parsed.status();
  return parsed->payload_bytes;
}

absl::StatusOr<engine::dataflow::TokenBatchPtr> decode_token_batch(std::span<const char> header,
                                                                   std::span<const char> payload,
                                                                   const WireLimits& limits) {
  constexpr const char* kWho = "token batch wire";
  caf::binary_deserializer source{nullptr, header.data(), header.size()};
  absl::StatusOr<ParsedHeader> parsed =
      parse_fixed_header(source, static_cast<int64_t>(header.size()), limits);
  if (!parsed.ok()) return parsed.status();
  const TokenBatchWireHeader& h = parsed->fixed;
  if (static_cast<int64_t>(payload.size()) != parsed->payload_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: payload is %d bytes, the header announces %d rows x %d values x %d bytes (%s) = %d",
        kWho, payload.size(), h.num_rows, h.width, wire_dtype_bytes(h.dtype),
        wire_dtype_name(h.dtype), parsed->payload_bytes));
  }

  // Every size below was bounded by `limits` and matched against the bytes present.
  auto batch = std::make_shared<TokenBatch>();
  batch->layer = h.layer;
  batch->payload = h.payload;
  batch->iteration = h.iteration;
  batch->tokens.resize(static_cast<size_t>(h.num_tokens));
  batch->segments.resize(static_cast<size_t>(h.num_segments));
  caf::error err;
  for (size_t i = 0; !err && i < batch->tokens.size(); ++i) err = source(batch->tokens[i]);
  for (size_t i = 0; !err && i < batch->segments.size(); ++i) err = source(batch->segments[i]);
  if (err) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: cannot read the token and segment records: %s", kWho, caf_error_text(err)));
  }
  if (absl::Status s = check_segments(batch->segments, h.num_tokens, "token batch wire header");
      !s.ok()) {
    return s;
  }

  if (h.dtype != WireDType::kNone) {
    auto act = std::make_shared<engine::dataflow::Activations>(h.num_rows, h.width);
    const int64_t num_values = h.num_rows * h.width;
    if (h.dtype == WireDType::kF32) {
      if (num_values > 0) std::memcpy(act->data.data(), payload.data(), payload.size());
    } else {
      const char* src = payload.data();
      for (int64_t i = 0; i < num_values; ++i) {
        uint16_t bits = 0;
        std::memcpy(&bits, src + i * sizeof(uint16_t), sizeof(bits));
        act->data[static_cast<size_t>(i)] = kernels::cpu::bf16_to_f32(bits);
      }
    }
    batch->act = std::move(act);
  }
  return batch;
}

absl::StatusOr<engine::dataflow::TokenBatchPtr> decode_token_batch(const WireBatch& wire,
                                                                   const WireLimits& limits) {
  return decode_token_batch(wire.header, wire.payload, limits);
}

}  // namespace muflow::transport
