// Next-token sampling (engine/serving/sampling.hpp): greedy argmax and its ties, determinism of the
// seeded draw per (seed, request, position), empirical frequencies against softmax(logits/T)
// computed here, the top-p nucleus, and the range of counter_uniform.

#include "engine/serving/sampling.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "kernels/reference/test_inputs.hpp"

namespace muflow::engine {
namespace {

using kernels::reference::test_seed;

topology::SamplingSpec spec(double temperature, double top_p, uint64_t seed) {
  topology::SamplingSpec s;
  s.temperature = temperature;
  s.top_p = top_p;
  s.seed = seed;
  return s;
}

TEST(Sampling, GreedyIsArgmaxWithTiesToLowestId) {
  const topology::SamplingSpec greedy = spec(0.0, 1.0, 1);
  const std::vector<float> a = {0.1f, -3.f, 2.5f, 2.4f, -7.f};
  EXPECT_EQ(serving::sample_token(a.data(), 5, greedy, 0, 0), 2);
  const std::vector<float> tie = {1.f, 4.f, 0.f, 4.f, 4.f};
  EXPECT_EQ(serving::sample_token(tie.data(), 5, greedy, 0, 0), 1);
  const std::vector<float> all_equal(7, -2.f);
  EXPECT_EQ(serving::sample_token(all_equal.data(), 7, greedy, 0, 0), 0);
  const std::vector<float> last = {-1.f, -1.f, -0.5f};
  EXPECT_EQ(serving::sample_token(last.data(), 3, greedy, 0, 0), 2);
  // Greedy ignores seed, request and position.
  EXPECT_EQ(serving::sample_token(a.data(), 5, spec(0.0, 0.5, 99), 12, 345), 2);
}

TEST(Sampling, CounterUniformInUnitInterval) {
  const uint64_t seed = test_seed("Sampling.CounterUniformInUnitInterval", 31337);
  double lo = 1.0, hi = 0.0, sum = 0.0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double u = serving::counter_uniform(seed, static_cast<uint64_t>(i) / 100, i % 100);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    sum += u;
  }
  EXPECT_LT(lo, 0.001);
  EXPECT_GT(hi, 0.999);
  // Mean of n uniforms: sd = 1/sqrt(12 n) ≈ 0.0009; allow 6 sd.
  EXPECT_NEAR(sum / n, 0.5, 0.006);
  // Extreme inputs stay in range.
  for (uint64_t v : {uint64_t{0}, ~uint64_t{0}, uint64_t{1} << 63}) {
    const double u = serving::counter_uniform(v, v, v);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
  // Deterministic, and each input matters.
  EXPECT_EQ(serving::counter_uniform(1, 2, 3), serving::counter_uniform(1, 2, 3));
  EXPECT_NE(serving::counter_uniform(1, 2, 3), serving::counter_uniform(2, 2, 3));
  EXPECT_NE(serving::counter_uniform(1, 2, 3), serving::counter_uniform(1, 3, 3));
  EXPECT_NE(serving::counter_uniform(1, 2, 3), serving::counter_uniform(1, 2, 4));
  EXPECT_NE(serving::counter_uniform(1, 2, 3), serving::counter_uniform(1, 3, 2));
}

std::vector<float> flat_logits(int64_t vocab) {
  // Nearly uniform: every token has real probability, so draws reveal the random stream.
  std::vector<float> logits(vocab);
  for (int64_t i = 0; i < vocab; ++i) logits[i] = 0.01f * static_cast<float>(i % 7);
  return logits;
}

TEST(Sampling, DeterministicPerSeedRequestPosition) {
  const uint64_t seed = test_seed("Sampling.DeterministicPerSeedRequestPosition", 4242);
  const int64_t vocab = 1000;
  const std::vector<float> logits = flat_logits(vocab);
  const topology::SamplingSpec s = spec(1.0, 1.0, seed);
  std::vector<int32_t> first;
  for (int64_t p = 0; p < 64; ++p)
    first.push_back(serving::sample_token(logits.data(), vocab, s, 3, p));
  // Same key → same token, in any call order.
  for (int64_t p = 63; p >= 0; --p) {
    EXPECT_EQ(serving::sample_token(logits.data(), vocab, s, 3, p), first[p]) << p;
  }
  // Different positions give different tokens (64 draws over ~1000 tokens: many distinct).
  EXPECT_GT(std::set<int32_t>(first.begin(), first.end()).size(), 40u);
  // Another seed or request changes most draws.
  int differ_seed = 0, differ_request = 0;
  for (int64_t p = 0; p < 64; ++p) {
    differ_seed +=
        serving::sample_token(logits.data(), vocab, spec(1.0, 1.0, seed + 1), 3, p) != first[p];
    differ_request += serving::sample_token(logits.data(), vocab, s, 4, p) != first[p];
  }
  EXPECT_GT(differ_seed, 50);
  EXPECT_GT(differ_request, 50);
}

// softmax(logits / T) computed here in double, independently of the code under test.
std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  double max_l = -std::numeric_limits<double>::infinity();
  for (float l : logits) max_l = std::max(max_l, static_cast<double>(l));
  std::vector<double> p(logits.size());
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    p[i] = std::exp((logits[i] - max_l) / temperature);
    total += p[i];
  }
  for (double& x : p) x /= total;
  return p;
}

// Counts draws over n distinct (request, position) keys.
std::vector<int64_t> histogram(const std::vector<float>& logits, const topology::SamplingSpec& s,
                               int n) {
  std::vector<int64_t> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) {
    const int32_t t = serving::sample_token(logits.data(), static_cast<int64_t>(logits.size()), s,
                                            i / 50, i % 50);
    EXPECT_GE(t, 0);
    EXPECT_LT(t, static_cast<int32_t>(logits.size()));
    if (t >= 0 && t < static_cast<int32_t>(logits.size())) ++counts[t];
  }
  return counts;
}

// Each count is Binomial(n, p): |count/n − p| ≤ 6·sqrt(p(1−p)/n) + 1/n fails with probability
// < 1e-8 per token for a correct sampler.
void expect_frequencies(const std::vector<int64_t>& counts, const std::vector<double>& p, int n) {
  for (size_t i = 0; i < p.size(); ++i) {
    const double freq = static_cast<double>(counts[i]) / n;
    const double bound = 6.0 * std::sqrt(p[i] * (1.0 - p[i]) / n) + 1.0 / n;
    EXPECT_NEAR(freq, p[i], bound) << "token " << i;
  }
}

TEST(Sampling, FrequenciesMatchSoftmaxOverTemperature) {
  const uint64_t seed = test_seed("Sampling.FrequenciesMatchSoftmaxOverTemperature", 777);
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 2.0f, 0.0f};
  const int n = 40000;
  for (double temperature : {1.0, 0.5, 2.0}) {
    SCOPED_TRACE(temperature);
    const std::vector<int64_t> counts = histogram(logits, spec(temperature, 1.0, seed), n);
    expect_frequencies(counts, softmax(logits, temperature), n);
  }
}

TEST(Sampling, TopPRestrictsToNucleus) {
  const uint64_t seed = test_seed("Sampling.TopPRestrictsToNucleus", 9001);
  // Probabilities (T = 1) 0.5, 0.3, 0.15, 0.05 over ids 2, 0, 3, 1.
  const std::vector<float> logits = {std::log(0.3f), std::log(0.05f), std::log(0.5f),
                                     std::log(0.15f)};
  const int n = 40000;
  // top_p 0.7: 0.5 < 0.7 ≤ 0.8, so the nucleus is {2, 0}, renormalised to 5/8, 3/8.
  std::vector<int64_t> counts = histogram(logits, spec(1.0, 0.7, seed), n);
  EXPECT_EQ(counts[1], 0);
  EXPECT_EQ(counts[3], 0);
  expect_frequencies(counts, {0.375, 0.0, 0.625, 0.0}, n);
  // top_p 0.4: only the most likely token.
  counts = histogram(logits, spec(1.0, 0.4, seed), 2000);
  EXPECT_EQ(counts[2], 2000);
  // top_p 0.9: {2, 0, 3} with 0.5/0.95, 0.3/0.95, 0.15/0.95; id 1 never.
  counts = histogram(logits, spec(1.0, 0.9, seed), n);
  EXPECT_EQ(counts[1], 0);
  expect_frequencies(counts, {0.3 / 0.95, 0.0, 0.5 / 0.95, 0.15 / 0.95}, n);
}

TEST(Sampling, VeryLowTemperatureIsNearlyGreedy) {
  const uint64_t seed = test_seed("Sampling.VeryLowTemperatureIsNearlyGreedy", 5);
  const std::vector<float> logits = {0.f, 1.f, 3.f, 2.9f};
  // T = 0.01: p(3)/p(2) = e^-10 ≈ 4.5e-5; 1000 draws almost surely all pick 2.
  const std::vector<int64_t> counts = histogram(logits, spec(0.01, 1.0, seed), 1000);
  EXPECT_GE(counts[2], 990);
  EXPECT_EQ(counts[0], 0);
  EXPECT_EQ(counts[1], 0);
}

}  // namespace
}  // namespace muflow::engine
