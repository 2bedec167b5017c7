#pragma once
/// \file
/// Naive dense layer: the oracle for kernels/cpu/linear.hpp.

#include <cstdint>

namespace muflow::kernels::reference {

/// y[m, n] = Σ_k x[m, k] · weight[n, k] (+ bias[n]), as HF `nn.Linear` (`x @ W.T + b`).
///
/// x: [num_rows, in_features] f32; weight: [out_features, in_features] f32 row-major (HF
/// layout); bias: [out_features] f32 or nullptr; y: [num_rows, out_features] f32 (written).
/// Accumulates in double in k order; the only rounding is the final cast to f32.
/// Any thread. Sizes must be ≥ 0 (num_rows may be 0).
void linear(const float* x, const float* weight, const float* bias, int64_t num_rows,
            int64_t out_features, int64_t in_features, float* y);

/// As `linear`, with bf16 weights (raw bits) and the cpu Linear's bf16 contract: each x value
/// is first rounded to bf16 (nearest-even), products and sums are taken in double.
void linear_bf16(const float* x, const uint16_t* weight, const float* bias, int64_t num_rows,
                 int64_t out_features, int64_t in_features, float* y);

}  // namespace muflow::kernels::reference
