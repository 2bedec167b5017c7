#include "engine/model/weight_tensor.hpp"

#include <cmath>
#include <cstring>

namespace muflow::engine::model {

const char* dtype_name(DType dtype) { return dtype == DType::kF32 ? "F32" : "BF16"; }

uint16_t f32_to_bf16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, sizeof u);
  if (std::isnan(value)) return static_cast<uint16_t>((u >> 16) | 0x40u);
  const uint32_t rounding_bias = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

int64_t WeightTensor::numel() const {
  if (shape.empty()) return 0;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<float> WeightTensor::to_f32() const {
  if (dtype == DType::kF32) return f32;
  std::vector<float> out(bf16.size());
  for (size_t i = 0; i < bf16.size(); ++i) out[i] = bf16_to_f32(bf16[i]);
  return out;
}

}  // namespace muflow::engine::model
