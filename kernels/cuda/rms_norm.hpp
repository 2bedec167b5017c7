#pragma once
/// \file
/// RMSNorm on the GPU (HF `MixtralRMSNorm`): y = weight · x / sqrt(mean(x²) + eps).

#include <cuda_runtime_api.h>

#include <cstdint>

namespace muflow::kernels::cuda {

/// x, y: [rows, dim] f32 device (may alias); weight: [dim] f32 device. One block per row,
/// the sum of squares in a fixed order (block_reduce.cuh): batch invariant. Asynchronous on
/// `stream`. Tolerance against kernels/reference: 4e-6·|ref| + 1e-7.
void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* y,
              cudaStream_t stream);

}  // namespace muflow::kernels::cuda
