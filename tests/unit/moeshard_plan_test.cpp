// MoEShard's shard plan: coverage and balance, and that summing the sharded SwiGLU partial
// outputs gives the unsharded expert (up to floating-point reassociation, checked in double).
#include <cmath>
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "engine/planning/moeshard_plan.hpp"
#include "engine/serving/sampling.hpp"

namespace muflow::engine {
namespace {

TEST(MoeShardPlan, CoversTheFfnOnceWithSizesDifferingByAtMostOne) {
  for (int64_t ffn : {1, 7, 64, 1408, 3072, 14336}) {
    for (int64_t devices : {1, 2, 3, 4, 6, 8, 60, 256}) {
      absl::StatusOr<planning::ShardPlan> p = planning::moeshard_plan(ffn, devices);
      ASSERT_TRUE(p.ok()) << p.status();
      ASSERT_EQ(static_cast<int64_t>(p->ranges.size()), devices);
      int64_t next = 0, lo = ffn, hi = 0;
      for (const planning::ShardRange& r : p->ranges) {
        EXPECT_EQ(r.begin, next) << "contiguous, in device order";
        EXPECT_GE(r.size(), 0);
        next = r.end;
        lo = std::min(lo, r.size());
        hi = std::max(hi, r.size());
      }
      EXPECT_EQ(next, ffn) << "ffn " << ffn << " over " << devices;
      EXPECT_LE(hi - lo, 1);
      // The remainder goes to the first devices.
      for (size_t d = 1; d < p->ranges.size(); ++d) {
        EXPECT_GE(p->ranges[d - 1].size(), p->ranges[d].size());
      }
    }
  }
}

TEST(MoeShardPlan, RejectsNonPositiveSizes) {
  EXPECT_FALSE(planning::moeshard_plan(0, 4).ok());
  EXPECT_FALSE(planning::moeshard_plan(16, 0).ok());
  EXPECT_NE(std::string(planning::moeshard_plan(-3, 2).status().message()).find("ffn=-3"),
            std::string::npos);
}

// y = down · (silu(gate x) ⊙ up x), in double, over ffn rows [begin, end).
std::vector<double> swiglu_part(const std::vector<double>& gate, const std::vector<double>& up,
                                const std::vector<double>& down, const std::vector<double>& x,
                                int64_t hidden, int64_t ffn, planning::ShardRange r) {
  std::vector<double> y(hidden, 0.0);
  for (int64_t f = r.begin; f < r.end; ++f) {
    double g = 0, u = 0;
    for (int64_t h = 0; h < hidden; ++h) {
      g += gate[f * hidden + h] * x[h];
      u += up[f * hidden + h] * x[h];
    }
    const double a = g / (1 + std::exp(-g)) * u;
    for (int64_t h = 0; h < hidden; ++h) y[h] += down[h * ffn + f] * a;
  }
  return y;
}

TEST(MoeShardPlan, ShardedPartialsSumToTheFullExpert) {
  const uint64_t seed = 31;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  const int64_t hidden = 12, ffn = 23;  // not divisible by 2, 3, 4 or 5
  auto rnd = [&](uint64_t i) { return serving::counter_uniform(seed, i, 0) * 2 - 1; };
  std::vector<double> gate(ffn * hidden), up(ffn * hidden), down(hidden * ffn), x(hidden);
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = rnd(i);
  for (size_t i = 0; i < up.size(); ++i) up[i] = rnd(1000 + i);
  for (size_t i = 0; i < down.size(); ++i) down[i] = rnd(2000 + i);
  for (size_t i = 0; i < x.size(); ++i) x[i] = rnd(3000 + i);
  const std::vector<double> full = swiglu_part(gate, up, down, x, hidden, ffn, {0, ffn});
  for (int64_t devices : {2, 3, 4, 5, 23, 30}) {
    absl::StatusOr<planning::ShardPlan> p = planning::moeshard_plan(ffn, devices);
    ASSERT_TRUE(p.ok());
    std::vector<double> sum(hidden, 0.0);
    for (const planning::ShardRange& r : p->ranges) {
      const std::vector<double> part = swiglu_part(gate, up, down, x, hidden, ffn, r);
      for (int64_t h = 0; h < hidden; ++h) sum[h] += part[h];
    }
    for (int64_t h = 0; h < hidden; ++h) {
      EXPECT_NEAR(sum[h], full[h], 1e-12) << devices << " devices, row " << h;
    }
  }
}

}  // namespace
}  // namespace muflow::engine
