// #16 "compute dtype by ISA" (kernels/cpu/bf16_compute.hpp): a Linear on bf16 weights computes
// in bf16 or in f32 (weights up-converted once) as asked; kAuto follows the CPU's native bf16;
// both paths give the same products (bf16 activations times bf16 weights, exact in f32), so
// they agree with a float64 reference to f32 accumulation error; the f32 path is batch
// invariant like the bf16 one. These tests check behaviour on whatever CPU runs them.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/bf16.hpp"
#include "kernels/cpu/bf16_compute.hpp"
#include "kernels/cpu/expert_ffn.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/reference/test_inputs.hpp"

namespace muflow::kernels::cpu {
namespace {

constexpr int64_t kIn = 96, kOut = 72, kRows = 21;

LinearOptions with(Bf16Compute compute) {
  LinearOptions o;
  o.bf16_compute = compute;
  return o;
}

TEST(Bf16Compute, NamesRoundTripAndUnknownTextIsRefused) {
  for (Bf16Compute c : {Bf16Compute::kAuto, Bf16Compute::kBF16, Bf16Compute::kF32}) {
    EXPECT_EQ(parse_bf16_compute(bf16_compute_name(c)), c);
  }
  EXPECT_FALSE(parse_bf16_compute("fp8").has_value());
  EXPECT_FALSE(parse_bf16_compute("").has_value());
  EXPECT_EQ(resolve_bf16_compute(Bf16Compute::kF32), Bf16Compute::kF32);
  EXPECT_EQ(resolve_bf16_compute(Bf16Compute::kBF16), Bf16Compute::kBF16);
  EXPECT_EQ(resolve_bf16_compute(Bf16Compute::kAuto),
            cpu_has_native_bf16() ? Bf16Compute::kBF16 : Bf16Compute::kF32);
}

TEST(Bf16Compute, EachPathMatchesTheReferenceAndTheF32PathIsBatchInvariant) {
  reference::SplitMix64 rng(1601);
  const std::vector<uint16_t> w = reference::random_bf16(rng, kOut * kIn, -0.5f, 0.5f);
  const std::vector<float> x = reference::random_floats(rng, kRows * kIn, -2.0f, 2.0f);
  // float64 reference of bf16(x) · Wᵀ, and Σ|terms| per output for the tolerance.
  std::vector<double> ref(kRows * kOut), mag(kRows * kOut);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t o = 0; o < kOut; ++o) {
      double s = 0, m = 0;
      for (int64_t k = 0; k < kIn; ++k) {
        const double t = static_cast<double>(bf16_to_f32(f32_to_bf16(x[r * kIn + k]))) *
                         bf16_to_f32(w[o * kIn + k]);
        s += t;
        m += std::abs(t);
      }
      ref[r * kOut + o] = s;
      mag[r * kOut + o] = m;
    }
  }
  for (Bf16Compute c : {Bf16Compute::kAuto, Bf16Compute::kBF16, Bf16Compute::kF32}) {
    const Linear lin(w.data(), kOut, kIn, nullptr, with(c));
    const Bf16Compute chosen = resolve_bf16_compute(c);
    if (chosen == Bf16Compute::kF32) {
      EXPECT_EQ(lin.weight_type(), LinearWeightType::kF32) << bf16_compute_name(c);
    }
    if (c == Bf16Compute::kAuto && cpu_has_native_bf16()) {
      EXPECT_EQ(lin.weight_type(), LinearWeightType::kBF16);
    }
    std::printf("[path] compute=%s -> %s\n", bf16_compute_name(c),
                lin.weight_type() == LinearWeightType::kBF16 ? "bf16" : "f32");
    std::vector<float> batch(kRows * kOut);
    lin.forward(x.data(), kRows, batch.data());
    for (int64_t i = 0; i < kRows * kOut; ++i) {
      // f32 accumulation of kIn exact products: error below kIn · 2^-24 · Σ|terms|.
      EXPECT_NEAR(batch[i], ref[i], kIn * 0x1p-24 * mag[i] + 1e-30) << bf16_compute_name(c);
    }
    // Batch invariance: each row alone gives bitwise the row of the batch.
    std::vector<float> one(kOut);
    for (int64_t r = 0; r < kRows; ++r) {
      lin.forward(x.data() + r * kIn, 1, one.data());
      EXPECT_EQ(0, std::memcmp(one.data(), batch.data() + r * kOut, kOut * sizeof(float)))
          << bf16_compute_name(c) << " row " << r;
    }
  }
}

TEST(Bf16Compute, ExpertFfnReportsItsPath) {
  reference::SplitMix64 rng(7);
  const int64_t hidden = 32, ffn = 48;
  const std::vector<uint16_t> gate = reference::random_bf16(rng, ffn * hidden, -0.3f, 0.3f);
  const std::vector<uint16_t> up = reference::random_bf16(rng, ffn * hidden, -0.3f, 0.3f);
  const std::vector<uint16_t> down = reference::random_bf16(rng, hidden * ffn, -0.3f, 0.3f);
  const ExpertFfn f32(gate.data(), up.data(), down.data(), hidden, ffn, Bf16Compute::kF32);
  EXPECT_EQ(f32.compute_type(), LinearWeightType::kF32);
  const ExpertFfn autod(gate.data(), up.data(), down.data(), hidden, ffn, Bf16Compute::kAuto);
  EXPECT_EQ(autod.compute_type(),
            cpu_has_native_bf16() ? LinearWeightType::kBF16 : LinearWeightType::kF32);
}

}  // namespace
}  // namespace muflow::kernels::cpu
