// Tests for kernels/cpu/rms_norm.hpp against kernels/reference/rms_norm.hpp.
// Tolerance policy (rms_norm): |y − y_ref| ≤ 4e-6 · |y_ref| + 1e-7 (a few f32 roundings:
// variance cast, rsqrt, two products; the sum itself is in double in both).

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/rms_norm.hpp"
#include "kernels/reference/rms_norm.hpp"
#include "kernels/reference/test_inputs.hpp"

namespace muflow::kernels::cpu {
namespace {

using reference::random_floats;
using reference::SplitMix64;

TEST(RmsNormTest, MatchesReference) {
  SplitMix64 rng(reference::test_seed("RmsNormTest.MatchesReference", 4001));
  for (int64_t rows : {0, 1, 3, 17}) {
    for (int64_t dim : {1, 2, 7, 64, 1023, 4096}) {
      for (float eps : {1e-6f, 1e-5f}) {
        SCOPED_TRACE(testing::Message() << "rows=" << rows << " dim=" << dim << " eps=" << eps);
        const std::vector<float> x = random_floats(rng, rows * dim, -5.0f, 5.0f);
        const std::vector<float> w = random_floats(rng, dim, -2.0f, 2.0f);
        std::vector<float> y(x.size(), -1.0f), y_ref(x.size());
        rms_norm(x.data(), w.data(), rows, dim, eps, y.data());
        reference::rms_norm(x.data(), w.data(), rows, dim, eps, y_ref.data());
        for (std::size_t i = 0; i < y.size(); ++i) {
          ASSERT_LE(std::fabs(y[i] - y_ref[i]), 4e-6f * std::fabs(y_ref[i]) + 1e-7f) << i;
        }
      }
    }
  }
}

TEST(RmsNormTest, InPlaceEqualsOutOfPlace) {
  SplitMix64 rng(reference::test_seed("RmsNormTest.InPlace", 4002));
  const int64_t rows = 5, dim = 333;
  std::vector<float> x = random_floats(rng, rows * dim, -1.0f, 1.0f);
  const std::vector<float> w = random_floats(rng, dim, 0.0f, 2.0f);
  std::vector<float> y(x.size());
  rms_norm(x.data(), w.data(), rows, dim, 1e-6f, y.data());
  rms_norm(x.data(), w.data(), rows, dim, 1e-6f, x.data());
  EXPECT_EQ(x, y);
}

TEST(RmsNormTest, KnownValuesAndZeroRowUsesEps) {
  // Row [3, 4]: mean(x²) = 12.5, eps 0 → x / sqrt(12.5).
  const float x[4] = {3.0f, 4.0f, 0.0f, 0.0f};
  const float w[2] = {1.0f, 2.0f};
  float y[4];
  rms_norm(x, w, 2, 2, 0.0f, y);
  EXPECT_FLOAT_EQ(y[0], 3.0f / std::sqrt(12.5f));
  EXPECT_FLOAT_EQ(y[1], 2.0f * 4.0f / std::sqrt(12.5f));
  rms_norm(x + 2, w, 1, 2, 1e-6f, y + 2);  // all-zero row: finite zeros, not NaN
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], 0.0f);
}

}  // namespace
}  // namespace muflow::kernels::cpu
