#pragma once
/// \file
/// Naive RMSNorm: the oracle for kernels/cpu/rms_norm.hpp.

#include <cstdint>

namespace muflow::kernels::reference {

/// Mirrors HF `MixtralRMSNorm.forward` (also Qwen2-MoE, Llama): per row,
/// y = weight · x / sqrt(mean(x²) + eps), everything in double, cast to f32 at the end.
/// x, y: [num_rows, dim] f32 (may alias); weight: [dim] f32. Any thread.
void rms_norm(const float* x, const float* weight, int64_t num_rows, int64_t dim, float eps,
              float* y);

}  // namespace muflow::kernels::reference
