#pragma once
/// \file
/// RMSNorm (Zhang & Sennrich 2019), as HF's MixtralRMSNorm: y = x / sqrt(mean(x²) + eps) · w.

#include <cstdint>

namespace muflow::kernels::cpu {

/// x, y: [num_rows, dim] f32 (may alias); weight: [dim] f32. Each row is reduced in index
/// order (batch invariant). Any thread.
void rms_norm(const float* x, const float* weight, int64_t num_rows, int64_t dim, float eps,
              float* y);

}  // namespace muflow::kernels::cpu
