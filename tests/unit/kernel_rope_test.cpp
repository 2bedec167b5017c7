// Tests for kernels/cpu/rope.hpp against kernels/reference/rope.hpp.
// Tolerance policy (rope): |y − y_ref| ≤ 2e-6 · (|x_i| + |x_{i+d/2}|) (cos/sin rounded to f32,
// two f32 products and one sum; the reference is all double).

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/rope.hpp"
#include "kernels/reference/rope.hpp"
#include "kernels/reference/test_inputs.hpp"

namespace muflow::kernels::cpu {
namespace {

using reference::random_floats;
using reference::SplitMix64;

TEST(RopeTest, MatchesReference) {
  SplitMix64 rng(reference::test_seed("RopeTest.MatchesReference", 5001));
  struct Shape {
    int64_t rows, heads, head_dim;
  };
  for (const Shape s : {Shape{0, 2, 8}, Shape{1, 1, 2}, Shape{3, 4, 64}, Shape{7, 3, 128},
                        Shape{5, 2, 6}}) {
    for (float theta : {10000.0f, 1000000.0f}) {
      SCOPED_TRACE(testing::Message() << "rows=" << s.rows << " heads=" << s.heads
                                      << " head_dim=" << s.head_dim << " theta=" << theta);
      const std::vector<float> x = random_floats(rng, s.rows * s.heads * s.head_dim, -2.0f, 2.0f);
      std::vector<int64_t> positions(s.rows);
      const int64_t some_positions[] = {0, 1, 17, 4095, 32767, 65000, 123};
      for (int64_t r = 0; r < s.rows; ++r) positions[r] = some_positions[r % 7];
      std::vector<float> y = x, y_ref = x;
      rope_rotate_half(y.data(), positions.data(), s.rows, s.heads, s.head_dim, theta);
      reference::rope_rotate_half(y_ref.data(), positions.data(), s.rows, s.heads, s.head_dim,
                                  theta);
      const int64_t half = s.head_dim / 2;
      for (std::size_t i = 0; i < y.size(); ++i) {
        const int64_t j = static_cast<int64_t>(i) % s.head_dim;
        const float partner = x[j < half ? i + half : i - half];
        ASSERT_LE(std::fabs(y[i] - y_ref[i]), 2e-6f * (std::fabs(x[i]) + std::fabs(partner)) + 1e-12f)
            << "element " << i;
      }
    }
  }
}

TEST(RopeTest, PositionZeroIsIdentityAndNormIsPreserved) {
  SplitMix64 rng(reference::test_seed("RopeTest.Identity", 5002));
  const int64_t heads = 2, head_dim = 16;
  const std::vector<float> x = random_floats(rng, 2 * heads * head_dim, -1.0f, 1.0f);
  std::vector<float> y = x;
  const int64_t positions[2] = {0, 1000};
  rope_rotate_half(y.data(), positions, 2, heads, head_dim, 10000.0f);
  for (int64_t i = 0; i < heads * head_dim; ++i) EXPECT_EQ(y[i], x[i]);
  // A rotation keeps each (i, i + d/2) pair's norm.
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < head_dim / 2; ++i) {
      const int64_t base = (heads + h) * head_dim;
      const float before = std::hypot(x[base + i], x[base + i + head_dim / 2]);
      const float after = std::hypot(y[base + i], y[base + i + head_dim / 2]);
      EXPECT_NEAR(after, before, 1e-6f);
    }
  }
}

TEST(RopeTest, KnownAngle) {
  // head_dim 2: a single pair with θ = p. At p = 1: (1, 0) → (cos 1, sin 1).
  float x[2] = {1.0f, 0.0f};
  const int64_t position = 1;
  rope_rotate_half(x, &position, 1, 1, 2, 10000.0f);
  EXPECT_FLOAT_EQ(x[0], static_cast<float>(std::cos(1.0)));
  EXPECT_FLOAT_EQ(x[1], static_cast<float>(std::sin(1.0)));
}

}  // namespace
}  // namespace muflow::kernels::cpu
