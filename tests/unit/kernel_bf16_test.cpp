// Tests for kernels/cpu/bf16.hpp: exact round-to-nearest-even f32 -> bf16 and exact widening.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/bf16.hpp"
#include "kernels/reference/test_inputs.hpp"

namespace muflow::kernels::cpu {
namespace {

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

TEST(Bf16Test, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);
  // 1 + 3·2^-8 is halfway between 1 + 2^-7 (odd mantissa) and 1 + 2^-6: rounds up to even.
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);
  // Just above the tie rounds up.
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808001u)), 0x3f81);
  // Just below the tie rounds down.
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
}

TEST(Bf16Test, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_bf16(inf), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-inf), 0xff80);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload lives only in the low 16 bits must not become inf.
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(from_bits(0x7f800001u)))));
  // The largest finite f32 rounds past the largest finite bf16: inf.
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
}

TEST(Bf16Test, WideningIsExactAndRoundTripIsIdentityOnBf16Values) {
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    const float f = bf16_to_f32(b);
    uint32_t f_bits;
    std::memcpy(&f_bits, &f, sizeof(f));
    ASSERT_EQ(f_bits, bits << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(f32_to_bf16(f), b) << bits;
    }
  }
}

TEST(Bf16Test, RoundingErrorIsAtMostHalfAnUlp) {
  reference::SplitMix64 rng(reference::test_seed("Bf16Test.RoundingError", 3001));
  for (int i = 0; i < 100000; ++i) {
    const float f = rng.uniform(-1000.0f, 1000.0f);
    const float r = bf16_to_f32(f32_to_bf16(f));
    // bf16 has 8 significant bits: |f − r| ≤ 2^-8 · 2^floor(log2|f|).
    const float half_ulp = std::ldexp(1.0f, std::ilogb(f) - 8);
    ASSERT_LE(std::fabs(f - r), half_ulp) << f;
  }
}

}  // namespace
}  // namespace muflow::kernels::cpu
