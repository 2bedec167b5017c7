#include <algorithm>

#include "kernels/assert.hpp"
#include "kernels/cuda/bf16.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/elementwise.hpp"

namespace muflow::kernels::cuda {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t count) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>((count + kThreads - 1) / kThreads, 65535)));
}

__global__ void embed_kernel(const float* table, const int32_t* ids, int64_t dim, float* h) {
  const float* src = table + static_cast<int64_t>(ids[blockIdx.x]) * dim;
  float* dst = h + static_cast<int64_t>(blockIdx.x) * dim;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) dst[i] = src[i];
}

__global__ void add_kernel(float* y, const float* x, int64_t count) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    y[i] += x[i];
  }
}

__global__ void round_kernel(const float* x, int64_t count, uint16_t* out) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    out[i] = f32_to_bf16_bits(x[i]);
  }
}

// One row: the dot product in index order, as the cpu stage computes it.
__device__ __forceinline__ void shared_gate_row(const float* x, const float* gate, int64_t r,
                                                int64_t dim, float* shared) {
  const float* xr = x + r * dim;
  float dot = 0.f;
  for (int64_t j = 0; j < dim; ++j) dot += xr[j] * gate[j];
  const float g = 1.f / (1.f + expf(-dot));
  float* sr = shared + r * dim;
  for (int64_t j = 0; j < dim; ++j) sr[j] *= g;
}

// One thread per row, grid-stride (the grid is capped at 65,535 blocks).
__global__ void shared_gate_kernel(const float* x, const float* gate, int64_t rows, int64_t dim,
                                   float* shared) {
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; r < rows;
       r += static_cast<int64_t>(gridDim.x) * kThreads) {
    shared_gate_row(x, gate, r, dim, shared);
  }
}

}  // namespace

void embed_gather(const float* table, const int32_t* ids, int64_t rows, int64_t dim, float* h,
                  cudaStream_t stream) {
  MUFLOW_ASSERT(rows >= 0 && dim > 0, "cuda embed_gather: bad sizes");
  if (rows == 0) return;
  embed_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(table, ids, dim, h);
  MUFLOW_CUDA_LAUNCH_CHECK();
}

void add_inplace(float* y, const float* x, int64_t count, cudaStream_t stream) {
  MUFLOW_ASSERT(count >= 0, "cuda add_inplace: bad size");
  if (count == 0) return;
  add_kernel<<<grid_for(count), kThreads, 0, stream>>>(y, x, count);
  MUFLOW_CUDA_LAUNCH_CHECK();
}

void round_to_bf16(const float* x, int64_t count, uint16_t* out, cudaStream_t stream) {
  MUFLOW_ASSERT(count >= 0, "cuda round_to_bf16: bad size");
  if (count == 0) return;
  round_kernel<<<grid_for(count), kThreads, 0, stream>>>(x, count, out);
  MUFLOW_CUDA_LAUNCH_CHECK();
}

void shared_expert_gate(const float* x, const float* gate, int64_t rows, int64_t dim, float* shared,
                        cudaStream_t stream) {
  MUFLOW_ASSERT(rows >= 0 && dim > 0, "cuda shared_expert_gate: bad sizes");
  if (rows == 0) return;
  shared_gate_kernel<<<grid_for(rows), kThreads, 0, stream>>>(x, gate, rows, dim, shared);
  MUFLOW_CUDA_LAUNCH_CHECK();
}

}  // namespace muflow::kernels::cuda
