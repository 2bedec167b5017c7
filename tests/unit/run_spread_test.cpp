// The sim's run spread draws (engine/exec/run_spread.hpp): a mean-1 log-normal factor with log
// standard deviation σ, the same for the same (seed, stream, n), bounded, and 1 without spread.

#include "engine/exec/run_spread.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace muflow::engine::exec {
namespace {

TEST(RunSpread, NoSpreadIsAFactorOfOne) {
  EXPECT_EQ(run_spread_factor(1, 2, 3, 0.0), 1.0);
  EXPECT_EQ(run_spread_factor(1, 2, 3, -0.5), 1.0);
  EXPECT_EQ(run_spread_factor(1, 2, 3, std::numeric_limits<double>::quiet_NaN()), 1.0);
  EXPECT_EQ(run_spread_factor(1, 2, 3, std::numeric_limits<double>::infinity()), 1.0);
}

TEST(RunSpread, DrawsAreCounterBased) {
  EXPECT_EQ(run_spread_factor(7, 11, 5, 0.2), run_spread_factor(7, 11, 5, 0.2));
  EXPECT_NE(run_spread_factor(7, 11, 5, 0.2), run_spread_factor(7, 11, 6, 0.2));
  EXPECT_NE(run_spread_factor(7, 11, 5, 0.2), run_spread_factor(7, 12, 5, 0.2));
  EXPECT_NE(run_spread_factor(7, 11, 5, 0.2), run_spread_factor(8, 11, 5, 0.2));
}

// Over 200,000 draws the factor's mean is 1 and its log has mean -σ²/2 and deviation σ (each
// within ~4 standard errors), and no factor leaves exp(±kRunSpreadMaxZ σ - σ²/2).
TEST(RunSpread, FactorsAreMeanOneLogNormalWithTheGivenSpreadAndBounded) {
  for (const double sigma : {0.1, 0.3}) {
    constexpr int kDraws = 200'000;
    double sum = 0, log_sum = 0, log_sq = 0;
    const double lo = std::exp(-kRunSpreadMaxZ * sigma - 0.5 * sigma * sigma);
    const double hi = std::exp(kRunSpreadMaxZ * sigma - 0.5 * sigma * sigma);
    for (uint64_t n = 0; n < kDraws; ++n) {
      const double f = run_spread_factor(42, n % 7, n, sigma);
      ASSERT_GE(f, lo);
      ASSERT_LE(f, hi);
      sum += f;
      log_sum += std::log(f);
      log_sq += std::log(f) * std::log(f);
    }
    const double mean = sum / kDraws, log_mean = log_sum / kDraws;
    const double log_sd = std::sqrt(log_sq / kDraws - log_mean * log_mean);
    const double se = sigma / std::sqrt(static_cast<double>(kDraws));
    EXPECT_NEAR(mean, 1.0, 4 * se * 1.1) << sigma;
    EXPECT_NEAR(log_mean, -0.5 * sigma * sigma, 4 * se) << sigma;
    EXPECT_NEAR(log_sd, sigma, 4 * se) << sigma;
  }
}

}  // namespace
}  // namespace muflow::engine::exec
