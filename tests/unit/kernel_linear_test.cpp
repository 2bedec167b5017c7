// Tests for kernels/cpu/linear.hpp against kernels/reference/linear.hpp.
//
// Tolerance policy (Linear): |y − y_ref| ≤ 1e-5 · Σ_k |x_k·w_k| (+|bias|) + 1e-30, i.e. relative
// to the magnitude of the terms being summed, the natural error scale of an f32 dot product
// (reference sums in double). bf16 uses the same bound because the reference mirrors the
// bf16 contract (x rounded to bf16; bf16·bf16 products are exact in f32).
// Every generic test runs for both kernels (LinearKernel::kAuto, which is the fixed-order
// kernel where the CPU has it, and kOneDnnTiles).
// The small-M fast path of the oneDNN tiles (kernels/cpu/linear.hpp), wherever its probe enables it, must be bitwise
// equal to the padded tiles: checked against a Linear with the path off and one whose probe is
// forced to fail. Whether the probe enables it (and whether bf16 weights compute in bf16) depends
// on the CPU and the oneDNN build: tests report it ("[path] ..." lines and test properties),
// never assert it.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kernels/cpu/bf16.hpp"
#include "kernels/cpu/linear.hpp"
#include "linear_paths_report.hpp"
#include "kernels/reference/linear.hpp"
#include "kernels/reference/test_inputs.hpp"

namespace muflow::kernels::cpu {
namespace {

using reference::random_bf16;
using reference::random_floats;
using reference::SplitMix64;

constexpr float kLinearRelTol = 1e-5f;

std::vector<float> abs_values(const std::vector<float>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = std::fabs(v[i]);
  return out;
}

std::vector<float> upcast(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_f32(v[i]);
  return out;
}

using testing_paths::report_linear_paths;

/// Checks y against the reference for f32 (bf16 == false) or bf16 weights.
void check_linear(int64_t num_rows, int64_t out, int64_t in, bool with_bias, bool bf16,
                  uint64_t seed, const LinearOptions& options = LinearOptions{}) {
  SCOPED_TRACE(testing::Message() << "rows=" << num_rows << " out=" << out << " in=" << in
                                  << " bias=" << with_bias << " bf16=" << bf16);
  SplitMix64 rng(seed);
  const std::vector<float> x = random_floats(rng, num_rows * in, -1.0f, 1.0f);
  const std::vector<float> bias = random_floats(rng, out, -0.5f, 0.5f);
  const float* bias_ptr = with_bias ? bias.data() : nullptr;
  std::vector<float> w_f32;
  std::vector<uint16_t> w_bf16;
  std::vector<float> y_ref(static_cast<std::size_t>(num_rows * out));
  std::vector<float> scale(y_ref.size());
  std::vector<float> x_for_scale = abs_values(x);
  std::vector<float> w_for_scale;
  if (bf16) {
    w_bf16 = random_bf16(rng, out * in, -0.2f, 0.2f);
    reference::linear_bf16(x.data(), w_bf16.data(), bias_ptr, num_rows, out, in, y_ref.data());
    w_for_scale = abs_values(upcast(w_bf16));
  } else {
    w_f32 = random_floats(rng, out * in, -0.2f, 0.2f);
    reference::linear(x.data(), w_f32.data(), bias_ptr, num_rows, out, in, y_ref.data());
    w_for_scale = abs_values(w_f32);
  }
  const std::vector<float> abs_bias = abs_values(bias);
  reference::linear(x_for_scale.data(), w_for_scale.data(), with_bias ? abs_bias.data() : nullptr,
                    num_rows, out, in, scale.data());

  const Linear linear = bf16 ? Linear(w_bf16.data(), out, in, bias_ptr, options)
                             : Linear(w_f32.data(), out, in, bias_ptr, options);
  if (options.force_probe_mismatch || !options.allow_small_m_path) {
    EXPECT_FALSE(linear.small_m_path_enabled());
  }
  EXPECT_EQ(linear.in_features(), in);
  EXPECT_EQ(linear.out_features(), out);
  // One sentinel row after the output: forward must write exactly num_rows rows.
  const float sentinel = 12345.0f;
  std::vector<float> y(static_cast<std::size_t>((num_rows + 1) * out), sentinel);
  linear.forward(x.data(), num_rows, y.data());
  for (int64_t i = 0; i < num_rows * out; ++i) {
    ASSERT_LE(std::fabs(y[i] - y_ref[i]), kLinearRelTol * scale[i] + 1e-30f)
        << "row " << i / out << " col " << i % out << " got " << y[i] << " want " << y_ref[i];
  }
  for (int64_t i = num_rows * out; i < (num_rows + 1) * out; ++i) {
    ASSERT_EQ(y[i], sentinel) << "wrote past num_rows at " << i;
  }
}

/// Parameters: bf16 weights, and the kernel asked for (kAuto: the fixed-order kernel where the
/// CPU runs it; kOneDnnTiles: oneDNN's tiles with the checked small-M path).
class LinearTest : public testing::TestWithParam<std::tuple<bool, LinearKernel>> {
 protected:
  static bool bf16_param() { return std::get<0>(GetParam()); }
  static LinearOptions kernel_options() {
    LinearOptions options;
    options.kernel = std::get<1>(GetParam());
    return options;
  }
};

/// The oneDNN tiles' own mechanisms (small-M path, its probe): parameter = bf16 weights.
class LinearTilesTest : public testing::TestWithParam<bool> {};

LinearOptions onednn_tiles() {
  LinearOptions options;
  options.kernel = LinearKernel::kOneDnnTiles;
  return options;
}

TEST_P(LinearTest, MatchesReferenceOnManyShapes) {
  const bool bf16 = bf16_param();
  const LinearOptions options = kernel_options();
  const uint64_t seed = reference::test_seed("LinearTest.MatchesReferenceOnManyShapes", 1001);
  // Row counts around the tile (kLinearMTile = 16): 0, 1, tile-1, tile, tile+1, several tiles.
  const int64_t rows_list[] = {0, 1, 2, kLinearMTile - 1, kLinearMTile, kLinearMTile + 1, 50};
  struct Shape {
    int64_t out, in;
  };
  const Shape shapes[] = {{1, 1}, {7, 13}, {64, 64}, {70, 100}, {257, 129}, {96, 1024}};
  uint64_t case_seed = seed;
  for (const Shape& s : shapes) {
    for (int64_t rows : rows_list) {
      for (bool bias : {false, true}) check_linear(rows, s.out, s.in, bias, bf16, case_seed++, options);
    }
  }
}

TEST_P(LinearTest, ConcurrentCallsFromThreadsAreIdenticalToSerial) {
  const bool bf16 = bf16_param();
  const LinearOptions options = kernel_options();
  const uint64_t seed = reference::test_seed("LinearTest.Concurrent", 1002);
  SplitMix64 rng(seed);
  const int64_t in = 96, out = 80, rows = 37;
  const std::vector<float> w = random_floats(rng, out * in, -0.3f, 0.3f);
  std::vector<uint16_t> w16(w.size());
  f32_to_bf16_n(w.data(), static_cast<int64_t>(w.size()), w16.data());
  const Linear linear =
      bf16 ? Linear(w16.data(), out, in, nullptr, options)
           : Linear(w.data(), out, in, nullptr, options);
  constexpr int kThreads = 4;
  std::vector<std::vector<float>> xs, serial(kThreads), parallel(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    xs.push_back(random_floats(rng, rows * in, -1.0f, 1.0f));
    serial[t].resize(rows * out);
    parallel[t].resize(rows * out);
    linear.forward(xs[t].data(), rows, serial[t].data());
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 20; ++repeat)
        linear.forward(xs[t].data(), rows, parallel[t].data());
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(std::memcmp(serial[t].data(), parallel[t].data(), serial[t].size() * sizeof(float)),
              0)
        << "thread " << t;
  }
}

// A byte copy of the prepacked weights (an expert slot) computes the same bits as the
// Linear's own weights, for every row count class (tiles, small-M remainder, padded tile).
TEST_P(LinearTest, ForwardFromACopyOfThePackedWeightsIsBitwiseEqual) {
  const bool bf16 = bf16_param();
  const LinearOptions options = kernel_options();
  SplitMix64 rng(77);
  const int64_t out = 24, in = 40;
  const std::vector<float> w = random_floats(rng, out * in, -0.2f, 0.2f);
  const std::vector<uint16_t> wb = random_bf16(rng, out * in, -0.2f, 0.2f);
  const Linear linear =
      bf16 ? Linear(wb.data(), out, in, nullptr, options)
           : Linear(w.data(), out, in, nullptr, options);
  const std::size_t bytes = linear.packed_bytes();
  ASSERT_GT(bytes, 0u);
  std::unique_ptr<unsigned char, void (*)(void*)> copy(
      static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)), &std::free);
  std::memcpy(copy.get(), linear.packed_data(), bytes);
  for (int64_t rows : {1, 3, 16, 37}) {
    const std::vector<float> x = random_floats(rng, rows * in, -1.0f, 1.0f);
    std::vector<float> want(rows * out), got(rows * out, -1.0f);
    linear.forward(x.data(), rows, want.data());
    linear.forward_packed(copy.get(), x.data(), rows, got.data());
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
        << rows << " rows";
  }
}

TEST_P(LinearTilesTest, ForcedProbeFailureFallsBackToPaddedTilesAndStaysCorrect) {
  const bool bf16 = GetParam();
  const uint64_t seed = reference::test_seed("LinearTest.ForcedProbeFailure", 1003);
  LinearOptions forced = onednn_tiles();
  forced.force_probe_mismatch = true;
  LinearOptions off = onednn_tiles();
  off.allow_small_m_path = false;
  uint64_t case_seed = seed;
  for (int64_t rows : {int64_t{1}, int64_t{3}, kLinearMTile + 2, int64_t{50}}) {
    for (bool bias : {false, true}) {
      check_linear(rows, 70, 100, bias, bf16, case_seed++, forced);
      check_linear(rows, 70, 100, bias, bf16, case_seed++, off);
    }
  }
}

// Where the probe enables the small-M path, every row count 1..2·kLinearMTile+1 (full tiles
// plus each remainder, those the small path takes and those it leaves to a padded tile) gives
// bitwise the padded-tiles result. Where the probe disables it (e.g. bf16 on a CPU without
// AVX512-BF16, where oneDNN's one-row kernel gives other bits), `fast` runs padded tiles too and
// the comparison still checks that it does so reproducibly; which case ran is reported.
TEST_P(LinearTilesTest, SmallMPathWhenEnabledIsBitwiseEqualToPaddedTiles) {
  const bool bf16 = GetParam();
  const uint64_t seed = reference::test_seed("LinearTest.SmallMPath", 1004);
  SplitMix64 rng(seed);
  struct Shape {
    int64_t out, in;
  };
  LinearOptions off = onednn_tiles();
  off.allow_small_m_path = false;
  LinearOptions forced = onednn_tiles();
  forced.force_probe_mismatch = true;
  int num_enabled = 0, num_linears = 0;
  for (const Shape s : {Shape{1, 1}, Shape{7, 13}, Shape{70, 100}, Shape{257, 129},
                        Shape{1024, 1024}, Shape{384, 4096}}) {
    for (bool with_bias : {false, true}) {
      SCOPED_TRACE(testing::Message() << "out=" << s.out << " in=" << s.in << " bias=" << with_bias
                                      << " bf16=" << bf16);
      const std::vector<float> w = random_floats(rng, s.out * s.in, -0.2f, 0.2f);
      std::vector<uint16_t> w16(w.size());
      f32_to_bf16_n(w.data(), static_cast<int64_t>(w.size()), w16.data());
      const std::vector<float> bias = random_floats(rng, s.out, -0.5f, 0.5f);
      const float* bias_ptr = with_bias ? bias.data() : nullptr;
      auto make = [&](const LinearOptions& options) {
        return bf16 ? Linear(w16.data(), s.out, s.in, bias_ptr, options)
                    : Linear(w.data(), s.out, s.in, bias_ptr, options);
      };
      const Linear fast = make(onednn_tiles());
      const Linear tiles_only = make(off);
      const Linear probe_failed = make(forced);
      report_linear_paths(std::string("linear_") + (bf16 ? "bf16_" : "f32_") +
                              std::to_string(s.out) + "x" + std::to_string(s.in) +
                              (with_bias ? "_bias" : ""),
                          fast);
      num_enabled += fast.small_m_path_enabled() ? 1 : 0;
      ++num_linears;
      EXPECT_FALSE(tiles_only.small_m_path_enabled());
      EXPECT_FALSE(probe_failed.small_m_path_enabled());
      for (int64_t rows = 1; rows <= 2 * kLinearMTile + 1; ++rows) {
        const std::vector<float> x = random_floats(rng, rows * s.in, -1.0f, 1.0f);
        std::vector<float> y_fast(rows * s.out), y_tiles(rows * s.out), y_failed(rows * s.out);
        fast.forward(x.data(), rows, y_fast.data());
        tiles_only.forward(x.data(), rows, y_tiles.data());
        probe_failed.forward(x.data(), rows, y_failed.data());
        ASSERT_EQ(std::memcmp(y_fast.data(), y_tiles.data(), y_fast.size() * sizeof(float)), 0)
            << "rows " << rows;
        ASSERT_EQ(std::memcmp(y_failed.data(), y_tiles.data(), y_fast.size() * sizeof(float)), 0)
            << "rows " << rows;
      }
    }
  }
  const std::string summary =
      std::to_string(num_enabled) + " of " + std::to_string(num_linears) + " shapes";
  std::printf("[path] small-M path enabled (%s): %s\n", bf16 ? "bf16" : "f32", summary.c_str());
  RecordProperty("small_m_path_enabled", summary);
}

TEST_P(LinearTest, ConcurrentSmallAndTileCallsAreBitwiseStable) {
  // Threads mix remainders taken by the small-M path where its probe enables it (1, 2 (bf16),
  // 17, 18 (bf16) rows) and by padded tiles (3, 4, 5, 20, 37) on one Linear; every result must
  // equal the serial one, and each row its row alone (whichever path runs; it is reported).
  const bool bf16 = bf16_param();
  const LinearOptions options = kernel_options();
  const uint64_t seed = reference::test_seed("LinearTest.ConcurrentSmallM", 1005);
  SplitMix64 rng(seed);
  const int64_t in = 200, out = 150;
  const std::vector<float> w = random_floats(rng, out * in, -0.3f, 0.3f);
  std::vector<uint16_t> w16(w.size());
  f32_to_bf16_n(w.data(), static_cast<int64_t>(w.size()), w16.data());
  const std::vector<float> bias = random_floats(rng, out, -0.5f, 0.5f);
  const Linear linear =
      bf16 ? Linear(w16.data(), out, in, bias.data(), options)
           : Linear(w.data(), out, in, bias.data(), options);
  report_linear_paths(bf16 ? "linear_bf16_150x200_bias" : "linear_f32_150x200_bias", linear);
  const int64_t rows_per_thread[] = {1, 2, 3, 4, 5, 17, 18, 37};
  constexpr int kThreads = 8;
  std::vector<std::vector<float>> xs(kThreads), serial(kThreads), parallel(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    const int64_t rows = rows_per_thread[t];
    xs[t] = random_floats(rng, rows * in, -1.0f, 1.0f);
    serial[t].resize(rows * out);
    parallel[t].resize(rows * out);
    linear.forward(xs[t].data(), rows, serial[t].data());
    std::vector<float> alone(out);
    for (int64_t r = 0; r < rows; ++r) {
      linear.forward(xs[t].data() + r * in, 1, alone.data());
      ASSERT_EQ(std::memcmp(alone.data(), serial[t].data() + r * out, out * sizeof(float)), 0)
          << "thread " << t << " row " << r;
    }
  }
  std::vector<std::thread> threads;
  std::vector<int> mismatches(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 50; ++repeat) {
        linear.forward(xs[t].data(), rows_per_thread[t], parallel[t].data());
        if (std::memcmp(serial[t].data(), parallel[t].data(), serial[t].size() * sizeof(float)) !=
            0) {
          ++mismatches[t];
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

INSTANTIATE_TEST_SUITE_P(
    WeightTypesAndKernels, LinearTest,
    testing::Combine(testing::Values(false, true),
                     testing::Values(LinearKernel::kAuto, LinearKernel::kOneDnnTiles)),
    [](const testing::TestParamInfo<std::tuple<bool, LinearKernel>>& info) {
      return std::string(std::get<0>(info.param) ? "bf16" : "f32") +
             (std::get<1>(info.param) == LinearKernel::kAuto ? "_auto" : "_onednn_tiles");
    });
INSTANTIATE_TEST_SUITE_P(WeightTypes, LinearTilesTest, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool>& info) {
                           return info.param ? "bf16" : "f32";
                         });

TEST(LinearWeightTypeTest, ReportsTypeInUse) {
  const float w[4] = {1, 2, 3, 4};
  const uint16_t w16[4] = {f32_to_bf16(1), f32_to_bf16(2), f32_to_bf16(3), f32_to_bf16(4)};
  EXPECT_EQ(Linear(w, 2, 2, nullptr).weight_type(), LinearWeightType::kF32);
  // bf16 weights compute in bf16 where oneDNN has a bf16 matmul for this CPU (native or
  // emulated), else in f32 (the documented fallback): reported, not asserted. Either way the
  // result is the bf16 contract (checked by the reference and exact tests).
  const Linear bf16_linear(w16, 2, 2, nullptr);
  report_linear_paths("linear_bf16_2x2", bf16_linear);
  const float x[2] = {1.0f, -1.0f};
  float y[2] = {0.0f, 0.0f};
  bf16_linear.forward(x, 1, y);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[1], -1.0f);
}

TEST(LinearExactTest, SmallIntegersAreExactWithBiasAndRoundedActivations) {
  // y = x·Wᵀ + b on small integers is exact in f32; bf16 rounds 1.00390625 (1 + 2^-8, a tie)
  // to 1.0 (nearest-even), so the bf16 result differs from the f32 one by exactly the tie.
  const float w[6] = {1, 2, 3, -1, 0, 2};  // [out=2, in=3]
  const float bias[2] = {0.5f, -4.0f};
  const float x[3] = {1.00390625f, 2.0f, -3.0f};
  float y[2];
  Linear(w, 2, 3, bias).forward(x, 1, y);
  EXPECT_FLOAT_EQ(y[0], 1.00390625f + 4.0f - 9.0f + 0.5f);
  EXPECT_FLOAT_EQ(y[1], -1.00390625f + 0.0f - 6.0f - 4.0f);
  uint16_t w16[6];
  f32_to_bf16_n(w, 6, w16);
  Linear(w16, 2, 3, bias).forward(x, 1, y);
  EXPECT_EQ(y[0], 1.0f + 4.0f - 9.0f + 0.5f);
  EXPECT_EQ(y[1], -1.0f + 0.0f - 6.0f - 4.0f);
}

TEST(LinearMoveTest, MovedLinearStillComputes) {
  const float w[2] = {2.0f, 3.0f};
  Linear a(w, 1, 2, nullptr);
  Linear b = std::move(a);
  const float x[2] = {1.0f, 1.0f};
  float y = 0.0f;
  b.forward(x, 1, &y);
  EXPECT_EQ(y, 5.0f);
  Linear c(w, 2, 1, nullptr);
  c = std::move(b);
  EXPECT_EQ(c.out_features(), 1);
  EXPECT_EQ(c.in_features(), 2);
}

}  // namespace
}  // namespace muflow::kernels::cpu
