#include <algorithm>

#include "kernels/assert.hpp"
#include "kernels/cuda/bf16.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/swiglu.hpp"

namespace muflow::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    swiglu_kernel(const float* gate_up, int64_t rows, int64_t ffn, float* out, uint16_t* out_bf16) {
  const int64_t total = rows * ffn;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t r = e / ffn, i = e % ffn;
    const float g = gate_up[r * 2 * ffn + i], u = gate_up[r * 2 * ffn + ffn + i];
    const float v = g / (1.0f + expf(-g)) * u;
    if (out != nullptr) out[e] = v;
    if (out_bf16 != nullptr) out_bf16[e] = f32_to_bf16_bits(v);
  }
}

}  // namespace

void swiglu(const float* gate_up, int64_t rows, int64_t ffn, float* out, uint16_t* out_bf16,
            cudaStream_t stream) {
  MUFLOW_ASSERT(rows >= 0 && ffn > 0, "cuda swiglu: bad sizes");
  if (rows == 0) return;
  const int64_t blocks = std::min<int64_t>((rows * ffn + kThreads - 1) / kThreads, 65535);
  swiglu_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(gate_up, rows, ffn, out,
                                                                        out_bf16);
  MUFLOW_CUDA_LAUNCH_CHECK();
}

}  // namespace muflow::kernels::cuda
