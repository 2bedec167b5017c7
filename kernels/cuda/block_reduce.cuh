#pragma once
/// \file
/// Deterministic block reductions for the kernels of this folder: a warp's butterfly
/// (shuffle xor 16, 8, 4, 2, 1), then the warps' results in warp order from the identity. The
/// order depends only on the block size, never on the data or on other blocks, so a row
/// reduced by one block gets the same bits in every batch. (cub::BlockReduce documents no
/// order, which the batch-invariance rule needs.) Device code; blockDim.x a multiple of 32,
/// ≤ 1024.

#include <cmath>

namespace muflow::kernels::cuda {

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/// `op` over the block (starting from `identity`); every thread gets it. `scratch`: 32 floats
/// of shared memory, free before and after (the call synchronizes the block twice).
template <typename Op>
__device__ __forceinline__ float block_reduce(float v, float* scratch, Op op, float identity) {
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = identity;
  for (int i = 0; i < warps; ++i) total = op(total, scratch[i]);
  __syncthreads();
  return total;
}

/// Sum over the block (from +0); every thread gets it. `scratch` as block_reduce.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  return block_reduce(v, scratch, SumOp{}, 0.f);
}

/// Max over the block (from −∞); every thread gets it. `scratch` as block_reduce.
__device__ __forceinline__ float block_max(float v, float* scratch) {
  return block_reduce(v, scratch, MaxOp{}, -INFINITY);
}

}  // namespace muflow::kernels::cuda
