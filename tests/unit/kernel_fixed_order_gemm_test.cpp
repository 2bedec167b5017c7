// Tests for kernels/cpu/fixed_order_gemm.hpp (#16 item 2) and the thread count of
// kernels/cpu/gemm_threads.hpp (#16 item 4).
//
// f32: the AVX-512 and the AVX2 kernel (each where the CPU runs it: both on an AVX-512 CPU)
// must give BITWISE the result of the scalar `std::fma` chain (k ascending from +0, bias
// last) for every shape, row count and thread count: that is the whole
// batch-invariance argument, so it is checked exactly, on inputs whose magnitudes span many
// binades (any reordering of a sum would show in the rounding). Shapes cover n not a multiple
// of 16 or 8 (masked lanes), several 64-column panels, k below and above the k-blocks (64
// AVX2, 256 AVX-512), and row counts on both sides of the 6-row register block and the
// 240-row outer block.
// bf16 (AVX512-BF16): `vdpbf16ps` rounds as the hardware does, so it is checked against the
// reference within the Linear tolerance (1e-5 · Σ|x·w|), and exactly for batch invariance and
// thread counts. bf16 weights computed in f32 (widened in registers, for CPUs without
// AVX512-BF16) must be bitwise the f32 kernel on the up-converted weights. Each test skips,
// saying so, on a CPU without the instructions it needs.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/bf16.hpp"
#include "kernels/cpu/expert_ffn.hpp"
#include "kernels/cpu/fixed_order_gemm.hpp"
#include "kernels/cpu/gemm_threads.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/reference/linear.hpp"
#include "kernels/reference/test_inputs.hpp"

namespace muflow::kernels::cpu {
namespace {

using reference::random_bf16;
using reference::random_floats;
using reference::SplitMix64;

struct GemmShape {
  int64_t n, k;
};
const GemmShape kGemmShapes[] = {{1, 1},    {7, 13},    {16, 128}, {70, 100},
                                 {65, 129}, {130, 257}, {200, 600}};
const int64_t kGemmRowCounts[] = {1, 2, 5, 6, 7, 13, 250};

/// Values with magnitudes spread over 2^-10..2^10 and mixed signs.
std::vector<float> spread_floats(SplitMix64& rng, int64_t count) {
  std::vector<float> values(static_cast<std::size_t>(count));
  for (float& v : values) {
    const float mantissa = rng.uniform(1.0f, 2.0f);
    const int exponent = static_cast<int>(rng.uniform(-10.0f, 10.99f));
    v = std::ldexp(rng.uniform(0.0f, 1.0f) < 0.5f ? -mantissa : mantissa, exponent);
  }
  return values;
}

/// 64-byte aligned storage for packed weights.
struct Packed {
  explicit Packed(std::size_t bytes)
      : data(std::aligned_alloc(64, (bytes + 63) / 64 * 64), &std::free) {}
  std::unique_ptr<void, decltype(&std::free)> data;
};

Packed pack_f32(const std::vector<float>& w, int64_t n, int64_t k) {
  Packed packed(fixed_order_packed_elems_f32(n, k) * sizeof(float));
  fixed_order_pack_f32(w.data(), n, k, static_cast<float*>(packed.data.get()));
  return packed;
}

Packed pack_bf16(const std::vector<uint16_t>& w, int64_t n, int64_t k) {
  Packed packed(fixed_order_packed_elems_bf16(n, k) * sizeof(uint16_t));
  fixed_order_pack_bf16(w.data(), n, k, static_cast<uint16_t*>(packed.data.get()));
  return packed;
}

/// x [rows, k] f32 → [rows, padded_k] bf16 bits with a zero padding column.
std::vector<uint16_t> to_padded_bf16(const std::vector<float>& x, int64_t rows, int64_t k) {
  const int64_t padded_k = fixed_order_padded_k_bf16(k);
  std::vector<uint16_t> out(static_cast<std::size_t>(rows * padded_k), 0);
  for (int64_t r = 0; r < rows; ++r) f32_to_bf16_n(x.data() + r * k, k, out.data() + r * padded_k);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// The f32 ISAs this CPU runs (AVX-512F hosts run both kernels, AVX2-only hosts one).
std::vector<VectorIsa> available_isas() {
  std::vector<VectorIsa> isas;
  for (const VectorIsa isa : {VectorIsa::kAvx512, VectorIsa::kAvx2}) {
    if (cpu_has_isa(isa)) isas.push_back(isa);
  }
  return isas;
}

TEST(FixedOrderGemm, AvailableWhereTheCpuRunsAVectorIsa) {
  const std::vector<VectorIsa> isas = available_isas();
  EXPECT_EQ(fixed_order_gemm_f32_available(), !isas.empty());
  if (isas.empty()) {
    EXPECT_FALSE(widest_vector_isa().has_value());
  } else {
    EXPECT_EQ(widest_vector_isa(), isas.front());
  }
  EXPECT_STREQ(vector_isa_name(VectorIsa::kAvx512), "avx512");
  EXPECT_STREQ(vector_isa_name(VectorIsa::kAvx2), "avx2");
}

TEST(FixedOrderGemm, F32IsBitwiseTheScalarFmaChainForEveryShapeRowCountAndThreadCount) {
  const std::vector<VectorIsa> isas = available_isas();
  if (isas.empty()) GTEST_SKIP() << "this CPU has neither AVX-512F nor AVX2+FMA";
  SplitMix64 rng(reference::test_seed("FixedOrderGemm.F32", 3101));
  for (const GemmShape s : kGemmShapes) {
    const std::vector<float> w = spread_floats(rng, s.n * s.k);
    const std::vector<float> bias = spread_floats(rng, s.n);
    const Packed packed = pack_f32(w, s.n, s.k);
    for (const int64_t rows : kGemmRowCounts) {
      const std::vector<float> x = spread_floats(rng, rows * s.k);
      for (const bool with_bias : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << "n=" << s.n << " k=" << s.k << " rows=" << rows << " bias=" << with_bias);
        const float* b = with_bias ? bias.data() : nullptr;
        std::vector<float> want(static_cast<std::size_t>(rows * s.n));
        fixed_order_gemm_f32_scalar(w.data(), s.n, s.k, x.data(), rows, b, want.data());
        for (const VectorIsa isa : isas) {
          for (const int threads : {1, 2, 3}) {
            // One sentinel row after the output: exactly `rows` rows are written.
            std::vector<float> got(static_cast<std::size_t>((rows + 1) * s.n), 777.0f);
            fixed_order_gemm_f32(static_cast<const float*>(packed.data.get()), s.n, s.k, x.data(),
                                 rows, b, got.data(), threads, isa);
            for (int64_t i = rows * s.n; i < (rows + 1) * s.n; ++i) {
              ASSERT_EQ(got[static_cast<std::size_t>(i)], 777.0f)
                  << vector_isa_name(isa) << " wrote past the last row";
            }
            got.resize(want.size());
            ASSERT_TRUE(same_bits(want, got))
                << vector_isa_name(isa) << ", " << threads << " threads";
          }
        }
      }
    }
  }
}

TEST(FixedOrderGemm, Bf16WeightsWidenedInRegistersAreBitwiseTheF32KernelOnUpconvertedWeights) {
  const std::vector<VectorIsa> isas = available_isas();
  if (isas.empty()) GTEST_SKIP() << "this CPU has neither AVX-512F nor AVX2+FMA";
  SplitMix64 rng(reference::test_seed("FixedOrderGemm.Bf16Weights", 3105));
  for (const GemmShape s : kGemmShapes) {
    const std::vector<uint16_t> w16 = random_bf16(rng, s.n * s.k, -0.5f, 0.5f);
    std::vector<float> w32(w16.size());
    for (std::size_t i = 0; i < w16.size(); ++i) w32[i] = bf16_to_f32(w16[i]);
    const std::vector<float> bias = spread_floats(rng, s.n);
    Packed packed(fixed_order_packed_elems_f32(s.n, s.k) * sizeof(uint16_t));
    fixed_order_pack_bf16_weights(w16.data(), s.n, s.k, static_cast<uint16_t*>(packed.data.get()));
    for (const int64_t rows : kGemmRowCounts) {
      SCOPED_TRACE(testing::Message() << "n=" << s.n << " k=" << s.k << " rows=" << rows);
      const std::vector<float> x = spread_floats(rng, rows * s.k);
      std::vector<float> want(static_cast<std::size_t>(rows * s.n));
      fixed_order_gemm_f32_scalar(w32.data(), s.n, s.k, x.data(), rows, bias.data(), want.data());
      for (const VectorIsa isa : isas) {
        for (const int threads : {1, 3}) {
          std::vector<float> got(want.size());
          fixed_order_gemm_bf16_weights(static_cast<const uint16_t*>(packed.data.get()), s.n, s.k,
                                        x.data(), rows, bias.data(), got.data(), threads, isa);
          ASSERT_TRUE(same_bits(want, got))
              << vector_isa_name(isa) << ", " << threads << " threads";
        }
      }
    }
  }
}

TEST(FixedOrderGemm, F32ScalarOracleIsNotOrderBlind) {
  // The exactness test above means something only if another summation order gives other
  // bits on these inputs: summing the same products in descending k must differ somewhere.
  SplitMix64 rng(reference::test_seed("FixedOrderGemm.OrderMatters", 3102));
  const int64_t n = 64, k = 300, rows = 4;
  const std::vector<float> w = spread_floats(rng, n * k);
  const std::vector<float> x = spread_floats(rng, rows * k);
  std::vector<float> ascending(rows * n), descending(rows * n);
  fixed_order_gemm_f32_scalar(w.data(), n, k, x.data(), rows, nullptr, ascending.data());
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t col = 0; col < n; ++col) {
      float acc = 0.0f;
      for (int64_t kk = k - 1; kk >= 0; --kk) acc = std::fma(x[m * k + kk], w[col * k + kk], acc);
      descending[static_cast<std::size_t>(m * n + col)] = acc;
    }
  }
  EXPECT_FALSE(same_bits(ascending, descending));
}

TEST(FixedOrderGemm, Bf16MatchesTheReferenceAndIsBatchAndThreadInvariant) {
  if (!fixed_order_gemm_bf16_available()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  SplitMix64 rng(reference::test_seed("FixedOrderGemm.Bf16", 3103));
  for (const GemmShape s : kGemmShapes) {
    const std::vector<uint16_t> w = random_bf16(rng, s.n * s.k, -0.2f, 0.2f);
    const std::vector<float> bias = random_floats(rng, s.n, -0.5f, 0.5f);
    const Packed packed = pack_bf16(w, s.n, s.k);
    const auto* pw = static_cast<const uint16_t*>(packed.data.get());
    std::vector<float> w_abs(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) w_abs[i] = std::fabs(bf16_to_f32(w[i]));
    for (const int64_t rows : kGemmRowCounts) {
      SCOPED_TRACE(testing::Message() << "n=" << s.n << " k=" << s.k << " rows=" << rows);
      const std::vector<float> x = random_floats(rng, rows * s.k, -1.0f, 1.0f);
      const std::vector<uint16_t> x16 = to_padded_bf16(x, rows, s.k);
      std::vector<float> want(static_cast<std::size_t>(rows * s.n));
      std::vector<float> scale(want.size());
      reference::linear_bf16(x.data(), w.data(), bias.data(), rows, s.n, s.k, want.data());
      std::vector<float> x_abs(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) {
        x_abs[i] = std::fabs(bf16_to_f32(f32_to_bf16(x[i])));
      }
      reference::linear(x_abs.data(), w_abs.data(), nullptr, rows, s.n, s.k, scale.data());
      std::vector<float> got(want.size());
      fixed_order_gemm_bf16(pw, s.n, s.k, x16.data(), rows, bias.data(), got.data(), 1);
      for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_LE(std::fabs(got[i] - want[i]),
                  1e-5f * (scale[i] + std::fabs(bias[i % s.n])) + 1e-30f)
            << "element " << i;
      }
      for (const int threads : {2, 3}) {
        std::vector<float> threaded(want.size());
        fixed_order_gemm_bf16(pw, s.n, s.k, x16.data(), rows, bias.data(), threaded.data(),
                              threads);
        ASSERT_TRUE(same_bits(got, threaded)) << threads << " threads";
      }
      // Every row alone gives its bits in the batch.
      const int64_t padded_k = fixed_order_padded_k_bf16(s.k);
      std::vector<float> alone(static_cast<std::size_t>(s.n));
      for (int64_t r = 0; r < rows; ++r) {
        fixed_order_gemm_bf16(pw, s.n, s.k, x16.data() + r * padded_k, 1, bias.data(), alone.data(),
                              1);
        ASSERT_EQ(std::memcmp(alone.data(), got.data() + r * s.n, s.n * sizeof(float)), 0)
            << "row " << r;
      }
    }
  }
}

TEST(GemmThreads, ScopeSetsTheCallingThreadsCountAndRestoresIt) {
  EXPECT_EQ(gemm_threads(), 1);
  {
    GemmThreadsScope outer(3);
    EXPECT_EQ(gemm_threads(), 3);
    {
      GemmThreadsScope inner(0);  // clamped to 1
      EXPECT_EQ(gemm_threads(), 1);
    }
    EXPECT_EQ(gemm_threads(), 3);
  }
  EXPECT_EQ(gemm_threads(), 1);
  GemmThreadsScope huge(1 << 20);
  EXPECT_EQ(gemm_threads(), kMaxGemmThreads);
}

TEST(GemmThreads, LinearAndExpertFfnGiveTheSameBitsWithOneTwoAndThreeThreads) {
  SplitMix64 rng(reference::test_seed("GemmThreads.Linear", 3104));
  const int64_t hidden = 192, ffn = 320, rows = 37;
  const std::vector<float> gate = random_floats(rng, ffn * hidden, -0.1f, 0.1f);
  const std::vector<float> up = random_floats(rng, ffn * hidden, -0.1f, 0.1f);
  const std::vector<float> down = random_floats(rng, hidden * ffn, -0.1f, 0.1f);
  const std::vector<uint16_t> gate16 = random_bf16(rng, ffn * hidden, -0.1f, 0.1f);
  const std::vector<uint16_t> up16 = random_bf16(rng, ffn * hidden, -0.1f, 0.1f);
  const std::vector<uint16_t> down16 = random_bf16(rng, hidden * ffn, -0.1f, 0.1f);
  const std::vector<float> x = random_floats(rng, rows * hidden, -1.0f, 1.0f);
  const Linear linear(gate.data(), ffn, hidden, nullptr);
  const ExpertFfn expert(gate.data(), up.data(), down.data(), hidden, ffn);
  const ExpertFfn expert16(gate16.data(), up16.data(), down16.data(), hidden, ffn);
  auto run = [&](int threads) {
    GemmThreadsScope scope(threads);
    std::vector<float> y(rows * ffn + 2 * rows * hidden);
    linear.forward(x.data(), rows, y.data());
    expert.forward(x.data(), rows, y.data() + rows * ffn);
    expert16.forward(x.data(), rows, y.data() + rows * ffn + rows * hidden);
    return y;
  };
  const std::vector<float> one = run(1);
  EXPECT_TRUE(same_bits(one, run(2)));
  EXPECT_TRUE(same_bits(one, run(3)));
}

}  // namespace
}  // namespace muflow::kernels::cpu
