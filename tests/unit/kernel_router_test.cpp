// Tests for kernels/cpu/router.hpp against kernels/reference/router.hpp.
// Tolerance policy (router_topk): expert ids exactly equal (inputs are built so that distinct
// logits differ by ≥ 1/32, or tie exactly); weights |w − w_ref| ≤ 2e-6 · w_ref + 1e-9.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/router.hpp"
#include "kernels/reference/router.hpp"
#include "kernels/reference/test_inputs.hpp"

namespace muflow::kernels::cpu {
namespace {

using reference::SplitMix64;

/// Logits on a 1/32 grid in [-4, 4]: well separated, with frequent exact ties for small grids.
std::vector<float> grid_logits(SplitMix64& rng, int64_t n, int64_t grid_points) {
  std::vector<float> logits(n);
  for (float& l : logits) {
    const auto step = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(grid_points));
    l = -4.0f + static_cast<float>(step) / 32.0f;
  }
  return logits;
}

void check_router(const std::vector<float>& logits, int64_t rows, int64_t experts, int64_t topk,
                  bool renormalize) {
  SCOPED_TRACE(testing::Message() << "rows=" << rows << " E=" << experts << " k=" << topk
                                  << " renorm=" << renormalize);
  std::vector<int32_t> ids(rows * topk, -1), ids_ref(rows * topk);
  std::vector<float> w(rows * topk), w_ref(rows * topk);
  router_topk(logits.data(), rows, experts, topk, renormalize, ids.data(), w.data());
  reference::router_topk(logits.data(), rows, experts, topk, renormalize, ids_ref.data(),
                         w_ref.data());
  ASSERT_EQ(ids, ids_ref);
  for (std::size_t i = 0; i < w.size(); ++i) {
    ASSERT_LE(std::fabs(w[i] - w_ref[i]), 2e-6f * w_ref[i] + 1e-9f) << i;
  }
  if (renormalize) {
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0.0;
      for (int64_t j = 0; j < topk; ++j) sum += w[r * topk + j];
      EXPECT_NEAR(sum, 1.0, 1e-6);
    }
  }
}

TEST(RouterTopkTest, MatchesReference) {
  SplitMix64 rng(reference::test_seed("RouterTopkTest.MatchesReference", 7001));
  struct Config {
    int64_t experts, topk;
  };
  // Mixtral (8, 2), Qwen2-MoE (60, 4), DeepSeek-ish (64, 6), k = 1, k = E, a single expert.
  for (const Config c : {Config{8, 2}, Config{60, 4}, Config{64, 6}, Config{16, 1},
                         Config{8, 8}, Config{1, 1}, Config{7, 3}}) {
    for (int64_t rows : {0, 1, 5, 33}) {
      for (bool renormalize : {false, true}) {
        for (int64_t grid : {257, 4}) {  // 4 grid points: many exact ties
          check_router(grid_logits(rng, rows * c.experts, grid), rows, c.experts, c.topk,
                       renormalize);
        }
      }
    }
  }
}

TEST(RouterTopkTest, TiesGoToTheLowerExpertId) {
  const float logits[6] = {0.5f, 2.0f, 1.0f, 2.0f, 1.0f, 2.0f};
  int32_t ids[4];
  float w[4];
  router_topk(logits, 1, 6, 4, false, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3);
  EXPECT_EQ(ids[2], 5);
  EXPECT_EQ(ids[3], 2);
  EXPECT_EQ(w[0], w[1]);
  EXPECT_EQ(w[1], w[2]);
  EXPECT_LT(w[3], w[2]);
}

TEST(RouterTopkTest, AllEqualLogitsAndKEqualsE) {
  const float logits[4] = {3.0f, 3.0f, 3.0f, 3.0f};
  int32_t ids[4];
  float w[4];
  router_topk(logits, 1, 4, 4, false, ids, w);
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(ids[j], j);
    EXPECT_FLOAT_EQ(w[j], 0.25f);
  }
  router_topk(logits, 1, 4, 2, true, ids, w);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 1);
  EXPECT_FLOAT_EQ(w[0], 0.5f);
  EXPECT_FLOAT_EQ(w[1], 0.5f);
}

TEST(RouterTopkTest, LargeAndMaskedLogitsStayFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  const float logits[4] = {1000.0f, 999.0f, -inf, -1000.0f};
  int32_t ids[2];
  float w[2];
  router_topk(logits, 1, 4, 2, false, ids, w);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 1);
  EXPECT_NEAR(w[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(w[1], std::exp(-1.0) / (1.0 + std::exp(-1.0)), 1e-6);
}

TEST(RouterTopkTest, NanLogitsRankLastWithoutCrashing) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float logits[3] = {nan, 1.0f, 0.0f};
  int32_t ids[3];
  float w[3];
  router_topk(logits, 1, 3, 3, false, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 2);
  EXPECT_EQ(ids[2], 0);
}

}  // namespace
}  // namespace muflow::kernels::cpu
