// Tests for kernels/cpu/fast_exp.hpp: accuracy against double exp, its range ends, and the
// vector forms' bits (AVX-512 and AVX2, each where the CPU runs it) against the scalar form's.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/fast_exp.hpp"

namespace muflow::kernels::cpu {
namespace {

/// The inputs of the sweeps: [-90, 90] in 400,001 steps, and the ends of the range exactly.
std::vector<float> sweep() {
  std::vector<float> xs;
  for (int i = 0; i <= 400000; ++i)
    xs.push_back(-90.0f + 180.0f * static_cast<float>(i) / 400000.0f);
  for (float x : {0.0f, -0.0f, -87.0f, 88.0f, std::nextafter(-87.0f, -100.0f),
                  std::nextafter(88.0f, 100.0f), 1e-30f, -1e-30f}) {
    xs.push_back(x);
  }
  return xs;
}

TEST(FastExpTest, WithinTwoUlpOnItsRange) {
  float worst_ulp = 0.0f, worst_x = 0.0f;
  for (float x : sweep()) {
    if (x < -87.0f || x > 88.0f) continue;
    const double want = std::exp(static_cast<double>(x));
    const auto want_f = static_cast<float>(want);
    const double ulp = static_cast<double>(std::nextafter(want_f, INFINITY)) - want_f;
    const auto err = static_cast<float>(std::fabs(fast_exp(x) - want) / ulp);
    if (err > worst_ulp) worst_ulp = err, worst_x = x;
  }
  EXPECT_LE(worst_ulp, 2.0f) << "at x = " << worst_x;
}

TEST(FastExpTest, RangeEndsAndSpecialValues) {
  EXPECT_EQ(fast_exp(0.0f), 1.0f);
  EXPECT_EQ(fast_exp(-0.0f), 1.0f);
  EXPECT_EQ(fast_exp(-87.5f), 0.0f);
  EXPECT_EQ(fast_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_GT(fast_exp(-87.0f), 0.0f);
  EXPECT_TRUE(std::isfinite(fast_exp(88.0f)));
  EXPECT_EQ(fast_exp(88.5f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fast_exp(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fast_exp(std::numeric_limits<float>::quiet_NaN())));
}

MUFLOW_TARGET_AVX512 void exp16_all(const std::vector<float>& xs, std::vector<float>& out) {
  for (std::size_t i = 0; i + 16 <= xs.size(); i += 16) {
    _mm512_storeu_ps(out.data() + i, fast_exp16(_mm512_loadu_ps(xs.data() + i)));
  }
}

MUFLOW_TARGET_AVX2 void exp8_all(const std::vector<float>& xs, std::vector<float>& out) {
  for (std::size_t i = 0; i + 8 <= xs.size(); i += 8) {
    _mm256_storeu_ps(out.data() + i, fast_exp8(_mm256_loadu_ps(xs.data() + i)));
  }
}

TEST(FastExpTest, VectorFormsGiveTheScalarFormsBits) {
  std::vector<VectorIsa> isas;
  for (const VectorIsa isa : {VectorIsa::kAvx512, VectorIsa::kAvx2}) {
    if (cpu_has_isa(isa)) isas.push_back(isa);
  }
  if (isas.empty()) GTEST_SKIP() << "neither AVX-512F nor AVX2+FMA: no vector form to run";
  std::vector<float> xs = sweep();
  xs.push_back(std::numeric_limits<float>::infinity());
  xs.push_back(-std::numeric_limits<float>::infinity());
  xs.push_back(std::numeric_limits<float>::quiet_NaN());
  xs.resize(xs.size() / 16 * 16 + 16, 1.5f);
  for (const VectorIsa isa : isas) {
    SCOPED_TRACE(vector_isa_name(isa));
    std::vector<float> vec(xs.size());
    if (isa == VectorIsa::kAvx512) {
      exp16_all(xs, vec);
    } else {
      exp8_all(xs, vec);
    }
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const float s = fast_exp(xs[i]);
      if (std::isnan(s)) {
        EXPECT_TRUE(std::isnan(vec[i])) << "x = " << xs[i];
        continue;
      }
      ASSERT_EQ(std::memcmp(&s, &vec[i], sizeof(float)), 0)
          << "x = " << xs[i] << ": " << s << " vs " << vec[i];
    }
  }
}

}  // namespace
}  // namespace muflow::kernels::cpu
