#pragma once
/// \file
/// bfloat16 <-> float conversion on raw bits (bf16 is the upper half of an IEEE f32).

#include <cstdint>
#include <cstring>

namespace muflow::kernels::cpu {

/// f32 -> bf16 bits, round to nearest, ties to even (what PyTorch's `.to(torch.bfloat16)`
/// and oneDNN's reorder do). NaN stays a quiet NaN with its sign; ±inf stay ±inf; values
/// that round past the largest finite bf16 become ±inf. Any thread.
inline uint16_t f32_to_bf16(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // NaN: keep sign, force quiet.
  }
  const uint32_t lsb = (bits >> 16) & 1u;
  bits += 0x7fffu + lsb;
  return static_cast<uint16_t>(bits >> 16);
}

/// bf16 bits -> f32 (exact). Any thread.
inline float bf16_to_f32(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float out = 0.0f;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

/// Rounds `num_values` f32 values to bf16 bits (`out[i] = f32_to_bf16(in[i])`). Any thread.
inline void f32_to_bf16_n(const float* in, int64_t num_values, uint16_t* out) {
  for (int64_t i = 0; i < num_values; ++i) out[i] = f32_to_bf16(in[i]);
}

}  // namespace muflow::kernels::cpu
