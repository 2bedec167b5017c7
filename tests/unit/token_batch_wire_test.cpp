// The token batch wire format (transport/token_batch_wire.hpp): round trips in f32 (bitwise)
// and bf16 (equal to the bf16-rounded input), every metadata field, null activations, the f32
// view encoder (same bytes, rows not copied), and rejection of malformed headers and payloads
// with an error naming what was wrong.

#include "transport/token_batch_wire.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "caf/binary_serializer.hpp"
#include "kernels/cpu/bf16.hpp"

namespace muflow::transport {
namespace {

using engine::dataflow::Activations;
using engine::dataflow::ExpertSegment;
using engine::dataflow::LayerId;
using engine::dataflow::Payload;
using engine::dataflow::StageKind;
using engine::dataflow::TokenBatch;
using engine::dataflow::TokenBatchPtr;
using engine::dataflow::TokenMeta;
using ::testing::HasSubstr;

// Seed for the random batches: 20250614, or MUFLOW_TEST_SEED when set. Printed.
uint64_t test_seed() {
  const char* env = std::getenv("MUFLOW_TEST_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : 20250614;
  std::printf("token batch wire seed %llu (override with MUFLOW_TEST_SEED)\n",
              static_cast<unsigned long long>(seed));
  return seed;
}

uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

// A batch of `num_tokens` tokens with random metadata, `num_experts` segments (if > 0) and, if
// `width >= 0`, activations whose values are random 32-bit patterns (NaNs, infinities and
// subnormals included).
TokenBatchPtr random_batch(std::mt19937_64& rng, int64_t num_tokens, int64_t width,
                           int32_t num_experts) {
  auto b = std::make_shared<TokenBatch>();
  b->layer = {StageKind::kExpert, static_cast<int32_t>(rng() % 64),
              static_cast<int32_t>(rng() % 256)};
  b->payload = Payload::kExpertInputs;
  b->iteration = static_cast<int64_t>(rng() >> 1);
  for (int64_t i = 0; i < num_tokens; ++i) {
    TokenMeta t;
    t.request_id = static_cast<int64_t>(rng());
    t.position = static_cast<int64_t>(rng() % 100000);
    t.token_id = static_cast<int32_t>(rng());
    t.origin_rank = static_cast<int32_t>(rng() % 8);
    t.topk_rank = static_cast<int16_t>(rng() % 8);
    t.topk_weight = from_bits(static_cast<uint32_t>(rng()));
    t.flags = static_cast<uint8_t>(rng());
    t.wave = static_cast<int64_t>(rng());
    b->tokens.push_back(t);
  }
  if (num_experts > 0 && num_tokens > 0) {
    // Split [0, num_tokens) at sorted cut points; experts ascend with random gaps.
    int64_t begin = 0;
    int32_t expert = 0;
    for (int32_t s = 0; s < num_experts && begin < num_tokens; ++s) {
      const int64_t left = num_tokens - begin;
      const int64_t n = s + 1 == num_experts ? left : 1 + static_cast<int64_t>(rng() % left);
      expert += 1 + static_cast<int32_t>(rng() % 3);
      b->segments.push_back({expert, begin, begin + n});
      begin += n;
    }
  }
  if (width >= 0) {
    b->act = std::make_shared<Activations>(num_tokens, width);
    for (float& v : b->act->data) v = from_bits(static_cast<uint32_t>(rng()));
  }
  return b;
}

void expect_same_metadata(const TokenBatch& a, const TokenBatch& b) {
  EXPECT_EQ(a.layer.kind, b.layer.kind);
  EXPECT_EQ(a.layer.block, b.layer.block);
  EXPECT_EQ(a.layer.index, b.layer.index);
  EXPECT_EQ(a.payload, b.payload);
  EXPECT_EQ(a.iteration, b.iteration);
  ASSERT_EQ(a.tokens.size(), b.tokens.size());
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    const TokenMeta& x = a.tokens[i];
    const TokenMeta& y = b.tokens[i];
    EXPECT_EQ(x.request_id, y.request_id) << "token " << i;
    EXPECT_EQ(x.position, y.position) << "token " << i;
    EXPECT_EQ(x.token_id, y.token_id) << "token " << i;
    EXPECT_EQ(x.origin_rank, y.origin_rank) << "token " << i;
    EXPECT_EQ(x.topk_rank, y.topk_rank) << "token " << i;
    EXPECT_EQ(bits_of(x.topk_weight), bits_of(y.topk_weight)) << "token " << i;
    EXPECT_EQ(x.flags, y.flags) << "token " << i;
    EXPECT_EQ(x.wave, y.wave) << "token " << i;
  }
  EXPECT_EQ(a.segments, b.segments);
}

TokenBatchPtr decode_ok(const WireBatch& wire, const WireLimits& limits = {}) {
  absl::StatusOr<TokenBatchPtr> out = decode_token_batch(wire, limits);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : nullptr;
}

// Serializes a fixed header plus records exactly as the encoder lays them out, so tests can
// forge headers that the encoder would refuse to produce.
std::vector<char> forge_header(const TokenBatchWireHeader& fixed,
                               const std::vector<TokenMeta>& tokens,
                               const std::vector<ExpertSegment>& segments) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  TokenBatchWireHeader h = fixed;
  EXPECT_FALSE(sink(h));
  for (TokenMeta t : tokens) EXPECT_FALSE(sink(t));
  for (ExpertSegment s : segments) EXPECT_FALSE(sink(s));
  return buf;
}

// A valid f32 header for `num_tokens` default tokens of `width` values, and its payload size.
TokenBatchWireHeader f32_header(int64_t num_tokens, int64_t width) {
  TokenBatchWireHeader h;
  h.layer = {StageKind::kExpert, 3, 5};
  h.payload = Payload::kExpertInputs;
  h.dtype = WireDType::kF32;
  h.num_tokens = num_tokens;
  h.num_rows = num_tokens;
  h.width = width;
  return h;
}

void expect_rejected(std::span<const char> header, std::span<const char> payload,
                     const std::string& needle, const WireLimits& limits = {}) {
  absl::StatusOr<TokenBatchPtr> out = decode_token_batch(header, payload, limits);
  ASSERT_FALSE(out.ok()) << "expected an error containing '" << needle << "'";
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(std::string(out.status().message()), HasSubstr(needle));
}

// ---- round trips -----------------------------------------------------------------------

TEST(TokenBatchWire, F32RoundTripIsBitwise) {
  std::mt19937_64 rng(test_seed());
  for (int64_t num_tokens : {1, 7, 64}) {
    for (int64_t width : {0, 1, 33, 256}) {
      TokenBatchPtr in = random_batch(rng, num_tokens, width, 4);
      absl::StatusOr<WireBatch> wire = encode_token_batch(*in, WireDType::kF32);
      ASSERT_TRUE(wire.ok()) << wire.status();
      EXPECT_EQ(wire->dtype, WireDType::kF32);
      EXPECT_EQ(wire->payload.size(), static_cast<size_t>(num_tokens * width * 4));
      TokenBatchPtr out = decode_ok(*wire);
      ASSERT_NE(out, nullptr);
      expect_same_metadata(*in, *out);
      ASSERT_NE(out->act, nullptr);
      EXPECT_EQ(out->act->num_rows, num_tokens);
      EXPECT_EQ(out->act->width, width);
      ASSERT_EQ(out->act->data.size(), in->act->data.size());
      for (size_t i = 0; i < in->act->data.size(); ++i) {
        ASSERT_EQ(bits_of(out->act->data[i]), bits_of(in->act->data[i]))
            << "value " << i << " of [" << num_tokens << ", " << width << "]";
      }
    }
  }
}

TEST(TokenBatchWire, Bf16RoundTripEqualsRoundedInput) {
  std::mt19937_64 rng(test_seed() + 1);
  TokenBatchPtr in = random_batch(rng, 48, 130, 3);
  // Edge values in the first row: ties to even (both ways), rounding past the largest finite
  // bf16, ±inf, ±0, a quiet and a signalling NaN, a subnormal.
  const std::vector<uint32_t> edges = {0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7f800000u,
                                       0xff800000u, 0x00000000u, 0x80000000u, 0x7fc00001u,
                                       0xff800001u, 0x00012345u, 0x3f800001u, 0xbf7fffffu};
  for (size_t i = 0; i < edges.size(); ++i) in->act->data[i] = from_bits(edges[i]);
  absl::StatusOr<WireBatch> wire = encode_token_batch(*in, WireDType::kBf16);
  ASSERT_TRUE(wire.ok()) << wire.status();
  EXPECT_EQ(wire->dtype, WireDType::kBf16);
  EXPECT_EQ(wire->payload.size(), in->act->data.size() * 2);
  TokenBatchPtr out = decode_ok(*wire);
  ASSERT_NE(out, nullptr);
  expect_same_metadata(*in, *out);
  ASSERT_NE(out->act, nullptr);
  EXPECT_EQ(out->act->num_rows, in->act->num_rows);
  EXPECT_EQ(out->act->width, in->act->width);
  ASSERT_EQ(out->act->data.size(), in->act->data.size());
  for (size_t i = 0; i < in->act->data.size(); ++i) {
    const float rounded = kernels::cpu::bf16_to_f32(kernels::cpu::f32_to_bf16(in->act->data[i]));
    ASSERT_EQ(bits_of(out->act->data[i]), bits_of(rounded))
        << "value " << i << " input bits 0x" << std::hex << bits_of(in->act->data[i]);
  }
  // Spot checks of the rounding itself: 1 + 2^-8 ties to 1, 1 + 3*2^-8 ties up to 1 + 2^-6.
  EXPECT_EQ(bits_of(out->act->data[0]), 0x3f800000u);
  EXPECT_EQ(bits_of(out->act->data[1]), 0x3f820000u);
  EXPECT_EQ(bits_of(out->act->data[2]), 0x7f800000u);  // past max finite bf16: +inf
}

TEST(TokenBatchWire, EveryMetadataFieldRoundTrips) {
  TokenBatch in;
  in.layer = {StageKind::kSampler, 61, 7};
  in.payload = Payload::kExpertOutputs;
  in.iteration = std::numeric_limits<int64_t>::max() - 3;
  TokenMeta a;
  a.request_id = std::numeric_limits<int64_t>::min();
  a.position = 123456789012345;
  a.token_id = -1;
  a.origin_rank = 2147483647;
  a.topk_rank = -32768;
  a.topk_weight = -0.0f;
  a.flags = engine::dataflow::kNeedsLogits | engine::dataflow::kSample;
  a.wave = -42;
  TokenMeta b;
  b.request_id = 9;
  b.position = 0;
  b.token_id = 151935;
  b.origin_rank = -3;
  b.topk_rank = 32767;
  b.topk_weight = std::numeric_limits<float>::infinity();
  b.flags = 0xff;
  b.wave = std::numeric_limits<int64_t>::max();
  TokenMeta c = b;
  c.topk_weight = from_bits(0x7fa12345u);  // signalling NaN with a payload
  TokenMeta d = a;
  d.topk_weight = std::numeric_limits<float>::denorm_min();
  TokenMeta e = a;
  e.topk_weight = 0.3333333f;
  in.tokens = {a, b, c, d, e};
  in.segments = {{0, 0, 2}, {5, 2, 3}, {2147483647, 3, 5}};
  for (WireDType dtype : {WireDType::kNone, WireDType::kF32, WireDType::kBf16}) {
    in.act = dtype == WireDType::kNone ? nullptr : std::make_shared<Activations>(5, 3);
    absl::StatusOr<WireBatch> wire = encode_token_batch(in, dtype);
    ASSERT_TRUE(wire.ok()) << wire.status();
    TokenBatchPtr out = decode_ok(*wire);
    ASSERT_NE(out, nullptr);
    SCOPED_TRACE(wire_dtype_name(dtype));
    expect_same_metadata(in, *out);
  }
  // Each stage kind and payload kind survives.
  for (StageKind kind : {StageKind::kAttention, StageKind::kExpert, StageKind::kSampler}) {
    for (Payload p : {Payload::kTokenIds, Payload::kResidual, Payload::kExpertInputs,
                      Payload::kExpertOutputs}) {
      TokenBatch x;
      x.layer = {kind, 1, 2};
      x.payload = p;
      absl::StatusOr<WireBatch> wire = encode_token_batch(x, WireDType::kF32);
      ASSERT_TRUE(wire.ok()) << wire.status();
      TokenBatchPtr out = decode_ok(*wire);
      ASSERT_NE(out, nullptr);
      EXPECT_EQ(out->layer.kind, kind);
      EXPECT_EQ(out->payload, p);
    }
  }
}

TEST(TokenBatchWire, HeaderLayoutSizes) {
  // Pins the format: 57 fixed bytes, 39 per token, 20 per segment.
  std::mt19937_64 rng(test_seed() + 2);
  for (int64_t n : {0, 1, 10}) {
    for (int32_t s : {0, 1, 3}) {
      TokenBatchPtr in = random_batch(rng, n, 4, s);
      absl::StatusOr<WireBatch> wire = encode_token_batch(*in, WireDType::kBf16);
      ASSERT_TRUE(wire.ok()) << wire.status();
      const auto num_segments = static_cast<int64_t>(in->segments.size());
      EXPECT_EQ(static_cast<int64_t>(wire->header.size()), 57 + 39 * n + 20 * num_segments);
      absl::StatusOr<int64_t> bytes = wire_payload_bytes(wire->header);
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      EXPECT_EQ(*bytes, n * 4 * 2);
    }
  }
}

TEST(TokenBatchWire, NullActivationsRoundTripAsNull) {
  std::mt19937_64 rng(test_seed() + 3);
  TokenBatchPtr in = random_batch(rng, 9, -1, 2);
  ASSERT_EQ(in->act, nullptr);
  for (WireDType asked : {WireDType::kNone, WireDType::kF32, WireDType::kBf16}) {
    absl::StatusOr<WireBatch> wire = encode_token_batch(*in, asked);
    ASSERT_TRUE(wire.ok()) << wire.status();
    EXPECT_EQ(wire->dtype, WireDType::kNone);
    EXPECT_TRUE(wire->payload.empty());
    absl::StatusOr<int64_t> bytes = wire_payload_bytes(wire->header);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(*bytes, 0);
    TokenBatchPtr out = decode_ok(*wire);
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(out->act, nullptr);
    expect_same_metadata(*in, *out);
  }
}

TEST(TokenBatchWire, EmptyActivationsStayNonNull) {
  TokenBatch in;
  in.act = std::make_shared<Activations>(0, 64);
  absl::StatusOr<WireBatch> wire = encode_token_batch(in, WireDType::kF32);
  ASSERT_TRUE(wire.ok()) << wire.status();
  EXPECT_TRUE(wire->payload.empty());
  TokenBatchPtr out = decode_ok(*wire);
  ASSERT_NE(out, nullptr);
  ASSERT_NE(out->act, nullptr);
  EXPECT_EQ(out->act->num_rows, 0);
  EXPECT_EQ(out->act->width, 64);
  EXPECT_TRUE(out->tokens.empty());
}

// The data plane's encoder: the same header as encode_token_batch(kF32), and as payload the
// batch's own rows (a view of act->data, not a copy), for batches with, without and with
// empty activations; it refuses what encode_token_batch refuses, with the same message.
TEST(TokenBatchWire, F32ViewIsTheF32EncodingWithoutACopy) {
  std::mt19937_64 rng(test_seed() + 11);
  TokenBatch empty_rows;
  empty_rows.act = std::make_shared<Activations>(0, 64);
  std::vector<TokenBatchPtr> batches = {random_batch(rng, 7, 33, 3), random_batch(rng, 9, -1, 2),
                                        std::make_shared<TokenBatch>(empty_rows)};
  for (const TokenBatchPtr& in : batches) {
    absl::StatusOr<WireBatch> copy = encode_token_batch(*in, WireDType::kF32);
    absl::StatusOr<WireBatchView> view = encode_token_batch_f32_view(*in);
    ASSERT_TRUE(copy.ok()) << copy.status();
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(view->header, copy->header);
    EXPECT_EQ(view->dtype, copy->dtype);
    ASSERT_EQ(view->payload.size(), copy->payload.size());
    EXPECT_TRUE(std::equal(view->payload.begin(), view->payload.end(), copy->payload.begin()));
    if (in->act != nullptr && !in->act->data.empty()) {
      EXPECT_EQ(view->payload.data(), reinterpret_cast<const char*>(in->act->data.data()))
          << "the payload is not a view of the batch's rows";
    }
  }
  TokenBatch bad = *batches[0];
  bad.act = std::make_shared<Activations>(5, 33);
  absl::StatusOr<WireBatchView> refused = encode_token_batch_f32_view(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status(), encode_token_batch(bad, WireDType::kF32).status());
}

// ---- the encoder refuses batches it could not represent -------------------------------

TEST(TokenBatchWire, EncodeRejectsInconsistentBatches) {
  std::mt19937_64 rng(test_seed() + 4);
  auto expect_encode_error = [](const TokenBatch& b, WireDType dtype, const std::string& needle) {
    absl::StatusOr<WireBatch> wire = encode_token_batch(b, dtype);
    ASSERT_FALSE(wire.ok()) << "expected '" << needle << "'";
    EXPECT_EQ(wire.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(wire.status().message()), HasSubstr(needle));
  };
  TokenBatchPtr good = random_batch(rng, 6, 8, 2);
  expect_encode_error(*good, WireDType::kNone, "must be f32 or bf16");
  expect_encode_error(*good, static_cast<WireDType>(9), "must be f32 or bf16");
  TokenBatch rows = *good;
  rows.act = std::make_shared<Activations>(5, 8);
  expect_encode_error(rows, WireDType::kF32, "act->num_rows = 5");
  TokenBatch data = *good;
  data.act = std::make_shared<Activations>(*good->act);
  data.act->data.pop_back();
  expect_encode_error(data, WireDType::kF32, "act->data holds 47 values");
  TokenBatch segs = *good;
  segs.segments = {{1, 0, 3}, {0, 3, 6}};
  expect_encode_error(segs, WireDType::kF32, "experts must ascend strictly");
  TokenBatch kind = *good;
  kind.layer.kind = static_cast<StageKind>(3);
  expect_encode_error(kind, WireDType::kF32, "layer.kind = 3");
  TokenBatch payload = *good;
  payload.payload = static_cast<Payload>(-1);
  expect_encode_error(payload, WireDType::kF32, "payload = -1");
}

// ---- the decoder trusts nothing -------------------------------------------------------

TEST(TokenBatchWire, RejectsTruncatedHeaderAtEveryLength) {
  std::mt19937_64 rng(test_seed() + 5);
  TokenBatchPtr in = random_batch(rng, 5, 4, 2);
  absl::StatusOr<WireBatch> wire = encode_token_batch(*in, WireDType::kF32);
  ASSERT_TRUE(wire.ok()) << wire.status();
  const std::span<const char> header(wire->header);
  for (size_t len = 0; len < header.size(); ++len) {
    SCOPED_TRACE(len);
    expect_rejected(header.first(len), wire->payload, "truncated");
  }
  // One byte more is trailing garbage.
  std::vector<char> longer = wire->header;
  longer.push_back(0);
  expect_rejected(longer, wire->payload, "1 trailing bytes");
}

TEST(TokenBatchWire, RejectsPayloadOfTheWrongLength) {
  std::mt19937_64 rng(test_seed() + 6);
  for (WireDType dtype : {WireDType::kF32, WireDType::kBf16}) {
    SCOPED_TRACE(wire_dtype_name(dtype));
    TokenBatchPtr in = random_batch(rng, 3, 5, 0);
    absl::StatusOr<WireBatch> wire = encode_token_batch(*in, dtype);
    ASSERT_TRUE(wire.ok()) << wire.status();
    const std::span<const char> payload(wire->payload);
    expect_rejected(wire->header, payload.first(payload.size() - 1), "payload is");
    expect_rejected(wire->header, {}, "payload is 0 bytes");
    std::vector<char> longer = wire->payload;
    longer.resize(longer.size() + 2);
    expect_rejected(wire->header, longer, "payload is");
  }
  // No activations announced, but a payload arrives.
  TokenBatchPtr sim = random_batch(rng, 3, -1, 0);
  absl::StatusOr<WireBatch> wire = encode_token_batch(*sim, WireDType::kF32);
  ASSERT_TRUE(wire.ok()) << wire.status();
  const std::vector<char> stray(12, 0);
  expect_rejected(wire->header, stray, "payload is 12 bytes");
}

TEST(TokenBatchWire, RejectsRowsNotEqualToTokens) {
  TokenBatchWireHeader h = f32_header(2, 4);
  h.num_rows = 3;
  const std::vector<char> payload(3 * 4 * 4, 0);
  expect_rejected(forge_header(h, std::vector<TokenMeta>(2), {}), payload,
                  "num_rows = 3 but num_tokens = 2");
  // No activations must mean no rows and no width.
  TokenBatchWireHeader none = f32_header(2, 0);
  none.dtype = WireDType::kNone;
  none.num_rows = 2;
  expect_rejected(forge_header(none, std::vector<TokenMeta>(2), {}), {}, "dtype none");
}

TEST(TokenBatchWire, RejectsCountsOverTheLimitsBeforeAllocating) {
  WireLimits limits;
  limits.max_tokens = 16;
  limits.max_width = 32;
  limits.max_segments = 4;
  limits.max_payload_bytes = 16 * 32 * 4;
  {
    TokenBatchWireHeader h = f32_header(2, 33);
    const std::vector<char> payload(2 * 33 * 4, 0);
    expect_rejected(forge_header(h, std::vector<TokenMeta>(2), {}), payload,
                    "width = 33 is outside [0, 32] (WireLimits::max_width)", limits);
  }
  {
    TokenBatchWireHeader h = f32_header(2, -1);
    expect_rejected(forge_header(h, std::vector<TokenMeta>(2), {}), {}, "width = -1", limits);
  }
  {
    // A header that claims 2^62 tokens is refused from the fixed part alone (the records are
    // absent: nothing was sized from the claim).
    TokenBatchWireHeader h = f32_header(int64_t{1} << 62, 8);
    expect_rejected(forge_header(h, {}, {}), {}, "WireLimits::max_tokens", limits);
    h = f32_header(17, 8);
    expect_rejected(forge_header(h, {}, {}), {}, "num_tokens = 17", limits);
    h = f32_header(-1, 8);
    h.num_rows = -1;
    expect_rejected(forge_header(h, {}, {}), {}, "num_tokens = -1", limits);
  }
  {
    TokenBatchWireHeader h = f32_header(1, 1);
    h.num_segments = int64_t{1} << 40;
    expect_rejected(forge_header(h, std::vector<TokenMeta>(1), {}), {}, "WireLimits::max_segments",
                    limits);
  }
  {
    // Within every per-field limit, but the payload exceeds max_payload_bytes.
    limits.max_payload_bytes = 100;
    TokenBatchWireHeader h = f32_header(4, 8);
    const std::vector<char> payload(4 * 8 * 4, 0);
    const std::vector<char> header = forge_header(h, std::vector<TokenMeta>(4), {});
    expect_rejected(header, payload, "WireLimits::max_payload_bytes", limits);
    absl::StatusOr<int64_t> bytes = wire_payload_bytes(header, limits);
    EXPECT_FALSE(bytes.ok());
  }
  {
    // Limits so large that the byte count itself would overflow.
    WireLimits huge;
    huge.max_tokens = std::numeric_limits<int64_t>::max();
    huge.max_width = std::numeric_limits<int64_t>::max();
    huge.max_payload_bytes = std::numeric_limits<int64_t>::max();
    TokenBatchWireHeader h = f32_header(int64_t{1} << 60, int64_t{1} << 60);
    expect_rejected(forge_header(h, {}, {}), {}, "overflow", huge);
  }
}

TEST(TokenBatchWire, RejectsEnumsOutOfRange) {
  const std::vector<TokenMeta> tokens(1);
  const std::vector<char> payload(4, 0);
  TokenBatchWireHeader h = f32_header(1, 1);
  h.layer.kind = static_cast<StageKind>(3);
  expect_rejected(forge_header(h, tokens, {}), payload, "layer.kind = 3 is not a StageKind");
  h = f32_header(1, 1);
  h.layer.kind = static_cast<StageKind>(-1);
  expect_rejected(forge_header(h, tokens, {}), payload, "layer.kind = -1");
  h = f32_header(1, 1);
  h.payload = static_cast<Payload>(4);
  expect_rejected(forge_header(h, tokens, {}), payload, "payload = 4 is not a Payload");
  h = f32_header(1, 1);
  h.dtype = static_cast<WireDType>(3);
  expect_rejected(forge_header(h, tokens, {}), payload, "dtype = 3 is not a WireDType");
  h = f32_header(1, 1);
  h.magic = 0x12345678u;
  expect_rejected(forge_header(h, tokens, {}), payload, "magic");
  h = f32_header(1, 1);
  h.version = 2;
  expect_rejected(forge_header(h, tokens, {}), payload, "version 2");
}

TEST(TokenBatchWire, RejectsSegmentsThatDoNotCoverTheRows) {
  const std::vector<TokenMeta> tokens(6);
  const std::vector<char> payload(6 * 2 * 4, 0);
  struct Case {
    std::vector<ExpertSegment> segments;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{{0, 0, 2}, {1, 3, 6}}, "begins at row 3, expected 2"},   // gap
      {{{0, 0, 3}, {1, 2, 6}}, "begins at row 2, expected 3"},   // overlap
      {{{0, 1, 6}}, "begins at row 1, expected 0"},              // not from row 0
      {{{0, 0, 2}, {1, 2, 5}}, "cover rows [0, 5) of 6"},        // short of the end
      {{{0, 0, 2}, {1, 2, 7}}, "end at most at row 6"},          // past the end
      {{{0, 0, 2}, {1, 2, 2}, {2, 2, 6}}, "must be non-empty"},  // empty segment
      {{{3, 0, 2}, {1, 2, 6}}, "experts must ascend strictly"},  // descending
      {{{3, 0, 2}, {3, 2, 6}}, "experts must ascend strictly"},  // repeated
      {{{-2, 0, 6}}, "expert -2"},                               // negative expert
      {{{0, 0, std::numeric_limits<int64_t>::max()}}, "end at most at row 6"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.needle);
    TokenBatchWireHeader h = f32_header(6, 2);
    h.num_segments = static_cast<int64_t>(c.segments.size());
    expect_rejected(forge_header(h, tokens, c.segments), payload, c.needle);
  }
  // The forged layout itself is accepted when the segments are right.
  TokenBatchWireHeader h = f32_header(6, 2);
  h.num_segments = 2;
  absl::StatusOr<TokenBatchPtr> ok =
      decode_token_batch(forge_header(h, tokens, {{0, 0, 2}, {4, 2, 6}}), payload);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->segments.size(), 2u);
}

TEST(TokenBatchWire, CorruptedBytesNeverCrash) {
  // Random byte flips in header and payload: every decode returns (ok or an error), within
  // small limits; run under ASan/UBSan (MUFLOW_SANITIZE=ON) for the memory-safety half.
  const uint64_t seed = test_seed() + 7;
  std::mt19937_64 rng(seed);
  TokenBatchPtr in = random_batch(rng, 12, 6, 3);
  absl::StatusOr<WireBatch> wire = encode_token_batch(*in, WireDType::kBf16);
  ASSERT_TRUE(wire.ok()) << wire.status();
  WireLimits limits;
  limits.max_tokens = 64;
  limits.max_width = 64;
  limits.max_segments = 8;
  limits.max_payload_bytes = 64 * 64 * 4;
  int num_ok = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    std::vector<char> header = wire->header;
    std::vector<char> payload = wire->payload;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      header[rng() % header.size()] = static_cast<char>(rng());
    }
    if (rng() % 4 == 0) payload.resize(rng() % (payload.size() + 8));
    absl::StatusOr<TokenBatchPtr> out = decode_token_batch(header, payload, limits);
    if (out.ok()) {
      ++num_ok;
      ASSERT_NE(*out, nullptr);
      // Whatever decoded is self-consistent.
      ASSERT_NE((*out)->act, nullptr);
      EXPECT_EQ((*out)->act->num_rows, (*out)->num_tokens());
    } else {
      EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    }
  }
  std::printf("corrupted decodes accepted: %d of 5000 (flips in record fields are valid)\n",
              num_ok);
}

}  // namespace
}  // namespace muflow::transport
