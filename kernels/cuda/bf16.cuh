#pragma once
/// \file
/// f32 → bf16 bits on the device, bit for bit kernels/cpu/bf16.hpp's f32_to_bf16 (nearest
/// even; NaN stays a quiet NaN with its sign).

#include <cstdint>

namespace muflow::kernels::cuda {

__device__ __forceinline__ uint16_t f32_to_bf16_bits(float value) {
  uint32_t bits = __float_as_uint(value);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace muflow::kernels::cuda
