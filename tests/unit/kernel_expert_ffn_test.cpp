// Tests for kernels/cpu/expert_ffn.hpp (ExpertFfn, swiglu) against
// kernels/reference/expert_ffn.hpp.
// Tolerance policy:
//   swiglu: |out − ref| ≤ 1e-6 · |ref| + 1e-30 (a handful of f32 roundings: exp, +, /, ·).
//   ExpertFfn f32:  |y − y_ref| ≤ 1e-5 · rms(y_ref row) per element.
//   ExpertFfn bf16: |y − y_ref| ≤ 2e-3 · rms(y_ref row): the activation is rounded to bf16
//     before `down`, and an activation within f32 noise of a bf16 rounding boundary can round
//     the other way in the reference (one bf16 ulp = 2^-8 relative on that element).

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/expert_ffn.hpp"
#include "kernels/cpu/gemm_threads.hpp"
#include "kernels/reference/expert_ffn.hpp"
#include "kernels/reference/test_inputs.hpp"

namespace muflow::kernels::cpu {
namespace {

using reference::random_bf16;
using reference::random_floats;
using reference::SplitMix64;

void expect_close_to_row_rms(const std::vector<float>& y, const std::vector<float>& y_ref,
                             int64_t rows, int64_t hidden, float rel_tol) {
  for (int64_t r = 0; r < rows; ++r) {
    double sum_squares = 0.0;
    for (int64_t i = 0; i < hidden; ++i) sum_squares += double{y_ref[r * hidden + i]} * y_ref[r * hidden + i];
    const float rms = static_cast<float>(std::sqrt(sum_squares / static_cast<double>(hidden)));
    for (int64_t i = 0; i < hidden; ++i) {
      ASSERT_LE(std::fabs(y[r * hidden + i] - y_ref[r * hidden + i]), rel_tol * rms + 1e-30f)
          << "row " << r << " col " << i << " got " << y[r * hidden + i] << " want "
          << y_ref[r * hidden + i];
    }
  }
}

struct FfnShape {
  int64_t hidden, ffn;
};
const FfnShape kShapes[] = {{1, 1}, {5, 3}, {64, 96}, {100, 70}, {256, 1024}};
const int64_t kRowCounts[] = {0, 1, kLinearMTile - 1, kLinearMTile, kLinearMTile + 1, 40};

TEST(ExpertFfnTest, F32MatchesReference) {
  SplitMix64 rng(reference::test_seed("ExpertFfnTest.F32", 8001));
  for (const FfnShape s : kShapes) {
    const std::vector<float> gate = random_floats(rng, s.ffn * s.hidden, -0.3f, 0.3f);
    const std::vector<float> up = random_floats(rng, s.ffn * s.hidden, -0.3f, 0.3f);
    const std::vector<float> down = random_floats(rng, s.hidden * s.ffn, -0.3f, 0.3f);
    const ExpertFfn ffn(gate.data(), up.data(), down.data(), s.hidden, s.ffn);
    EXPECT_EQ(ffn.hidden(), s.hidden);
    EXPECT_EQ(ffn.ffn(), s.ffn);
    for (int64_t rows : kRowCounts) {
      SCOPED_TRACE(testing::Message() << "hidden=" << s.hidden << " ffn=" << s.ffn << " rows=" << rows);
      const std::vector<float> x = random_floats(rng, rows * s.hidden, -2.0f, 2.0f);
      std::vector<float> y(rows * s.hidden + 1, 777.0f), y_ref(rows * s.hidden);
      ffn.forward(x.data(), rows, y.data());
      reference::expert_ffn(x.data(), gate.data(), up.data(), down.data(), rows, s.hidden, s.ffn,
                            y_ref.data());
      EXPECT_EQ(y.back(), 777.0f) << "wrote past num_rows";
      y.pop_back();
      expect_close_to_row_rms(y, y_ref, rows, s.hidden, 1e-5f);
    }
  }
}

TEST(ExpertFfnTest, BF16MatchesReference) {
  SplitMix64 rng(reference::test_seed("ExpertFfnTest.BF16", 8002));
  for (const FfnShape s : kShapes) {
    const std::vector<uint16_t> gate = random_bf16(rng, s.ffn * s.hidden, -0.3f, 0.3f);
    const std::vector<uint16_t> up = random_bf16(rng, s.ffn * s.hidden, -0.3f, 0.3f);
    const std::vector<uint16_t> down = random_bf16(rng, s.hidden * s.ffn, -0.3f, 0.3f);
    const ExpertFfn ffn(gate.data(), up.data(), down.data(), s.hidden, s.ffn);
    for (int64_t rows : kRowCounts) {
      SCOPED_TRACE(testing::Message() << "hidden=" << s.hidden << " ffn=" << s.ffn << " rows=" << rows);
      const std::vector<float> x = random_floats(rng, rows * s.hidden, -2.0f, 2.0f);
      std::vector<float> y(rows * s.hidden), y_ref(rows * s.hidden);
      ffn.forward(x.data(), rows, y.data());
      reference::expert_ffn_bf16(x.data(), gate.data(), up.data(), down.data(), rows, s.hidden,
                                 s.ffn, y_ref.data());
      expect_close_to_row_rms(y, y_ref, rows, s.hidden, 2e-3f);
    }
  }
}

TEST(SwigluTest, MatchesReference) {
  SplitMix64 rng(reference::test_seed("SwigluTest.MatchesReference", 8003));
  for (int64_t rows : {0, 1, 9}) {
    for (int64_t ffn : {1, 7, 1408}) {
      const std::vector<float> gate_up = random_floats(rng, rows * 2 * ffn, -12.0f, 12.0f);
      std::vector<float> out(rows * ffn), out_ref(rows * ffn);
      swiglu(gate_up.data(), rows, ffn, out.data());
      reference::swiglu(gate_up.data(), rows, ffn, out_ref.data());
      for (std::size_t i = 0; i < out.size(); ++i) {
        ASSERT_LE(std::fabs(out[i] - out_ref[i]), 1e-6f * std::fabs(out_ref[i]) + 1e-30f) << i;
      }
    }
  }
}

TEST(SwigluTest, VectorPathsAndThreadsGiveTheScalarFormsBits) {
  std::vector<VectorIsa> isas;
  for (const VectorIsa isa : {VectorIsa::kAvx512, VectorIsa::kAvx2}) {
    if (cpu_has_isa(isa)) isas.push_back(isa);
  }
  if (isas.empty()) GTEST_SKIP() << "neither AVX-512F nor AVX2+FMA: both are the scalar form";
  // swiglu (16 lanes with AVX-512F, 8 with AVX2, rows over 2 threads when big enough) against
  // swiglu_generic (one element at a time): bitwise, ffn not a multiple of 16 or 8 included.
  SplitMix64 rng(reference::test_seed("SwigluTest.VectorPathIsBitwise", 8004));
  GemmThreadsScope two(2);
  for (int64_t rows : {1, 3, 64}) {
    for (int64_t ffn : {5, 12, 16, 1408, 2050}) {
      SCOPED_TRACE(testing::Message() << rows << " rows, ffn " << ffn);
      const std::vector<float> gate_up = random_floats(rng, rows * 2 * ffn, -100.0f, 100.0f);
      std::vector<float> scalar(rows * ffn, 1.0f);
      swiglu_generic(gate_up.data(), rows, ffn, scalar.data());
      for (const VectorIsa isa : isas) {
        std::vector<float> fast(rows * ffn, -1.0f);
        swiglu(gate_up.data(), rows, ffn, fast.data(), isa);
        ASSERT_EQ(std::memcmp(fast.data(), scalar.data(), fast.size() * sizeof(float)), 0)
            << vector_isa_name(isa);
      }
    }
  }
}

TEST(SwigluTest, SaturatesWithoutNan) {
  // gate_up row: gate = [-200, 0, 200], up = [3, 3, 3]; silu(-200) ≈ -0, silu(200) = 200.
  const float gate_up[6] = {-200.0f, 0.0f, 200.0f, 3.0f, 3.0f, 3.0f};
  float out[3];
  swiglu(gate_up, 1, 3, out);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 600.0f);
}

}  // namespace
}  // namespace muflow::kernels::cpu
