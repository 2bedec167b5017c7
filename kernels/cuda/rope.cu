#include "kernels/assert.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/rope.hpp"

namespace muflow::kernels::cuda {
namespace {

constexpr int kThreads = 128;

// Grid (rows, pair blocks): one thread per (head, pair) of a row.
__global__ void __launch_bounds__(kThreads)
    rope_kernel(float* qkv, int64_t row_stride, const int64_t* positions, int64_t heads,
                int64_t head_dim, double theta) {
  const int64_t half = head_dim / 2;
  float* row = qkv + static_cast<int64_t>(blockIdx.x) * row_stride;
  const double p = static_cast<double>(positions[blockIdx.x]);
  const int64_t e = static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x;
  if (e < heads * half) {
    const int64_t h = e / half, i = e % half;
    const double inv_freq =
        pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    const double angle = p * inv_freq;
    const float cs = static_cast<float>(cos(angle)), sn = static_cast<float>(sin(angle));
    float* head = row + h * head_dim;
    const float a = head[i], b = head[i + half];
    head[i] = a * cs - b * sn;
    head[i + half] = b * cs + a * sn;
  }
}

}  // namespace

void rope_qk(float* qkv, int64_t row_stride, const int64_t* positions, int64_t rows,
             int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float theta,
             cudaStream_t stream) {
  MUFLOW_ASSERT(rows >= 0 && num_heads > 0 && num_kv_heads > 0 && head_dim > 0 && head_dim % 2 == 0,
                "cuda rope_qk: bad sizes");
  MUFLOW_ASSERT(row_stride >= (num_heads + num_kv_heads) * head_dim, "cuda rope_qk: row too short");
  if (rows == 0) return;
  // q and k heads are contiguous at the start of each row: one pass over num_heads + kv heads.
  const int64_t pairs = (num_heads + num_kv_heads) * head_dim / 2;
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>((pairs + kThreads - 1) / kThreads));
  rope_kernel<<<grid, kThreads, 0, stream>>>(qkv, row_stride, positions, num_heads + num_kv_heads,
                                             head_dim, static_cast<double>(theta));
  MUFLOW_CUDA_LAUNCH_CHECK();
}

}  // namespace muflow::kernels::cuda
