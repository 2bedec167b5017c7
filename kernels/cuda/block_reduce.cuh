#pragma once
/// \file
/// Deterministic block reductions for the kernels of this folder: a warp's butterfly
/// (shuffle xor 16, 8, 4, 2, 1), then the warps' results in warp order. The order depends only
/// on the block size, never on the data or on other blocks, so a row reduced by one block
/// gets the same bits in every batch. Device code; blockDim.x a multiple of 32, ≤ 1024.

namespace muflow::kernels::cuda {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// Sum over the block; every thread gets it. `scratch`: 32 floats of shared memory, free
/// before and after (the call synchronizes the block twice).
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.f;
  for (int i = 0; i < warps; ++i) total += scratch[i];
  __syncthreads();
  return total;
}

/// Max over the block; every thread gets it. `scratch` as block_sum.
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  v = warp_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int i = 0; i < warps; ++i) m = fmaxf(m, scratch[i]);
  __syncthreads();
  return m;
}

}  // namespace muflow::kernels::cuda
