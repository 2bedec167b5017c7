#pragma once
/// \file
/// Four steps of an fmaf chain from 16-byte operands: what the f32 kernels that must keep the
/// cpu's per-element order (kernels/cpu/fixed_order_gemm.hpp) run after a vector load. Device
/// code only; internal to kernels/cuda.

namespace muflow::kernels::cuda {

/// acc = fmaf(x.x, y.x, acc), then .y, .z and .w: the chain's next four k, in order.
__device__ __forceinline__ float fma_chain4(float4 x, float4 y, float acc) {
  acc = fmaf(x.x, y.x, acc);
  acc = fmaf(x.y, y.y, acc);
  acc = fmaf(x.z, y.z, acc);
  return fmaf(x.w, y.w, acc);
}

}  // namespace muflow::kernels::cuda
