#include "engine/model/weight_tensor.hpp"

#include <cmath>
#include <cstring>

#include "kernels/assert.hpp"

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

WeightTensor concat_rows(const std::vector<const WeightTensor*>& parts) {
  MUFLOW_ASSERT(!parts.empty(), "concat_rows: no parts");
  WeightTensor out;
  out.dtype = DType::kBF16;
  int64_t rows = 0;
  for (const WeightTensor* p : parts) {
    MUFLOW_ASSERT(p->cols() == parts.front()->cols(), "concat_rows: parts of different widths");
    if (p->dtype != DType::kBF16) out.dtype = DType::kF32;
    rows += p->rows();
  }
  out.shape = {rows, parts.front()->cols()};
  for (const WeightTensor* p : parts) {
    if (out.dtype == DType::kF32) {
      std::vector<float> f = p->to_f32();
      out.f32.insert(out.f32.end(), f.begin(), f.end());
    } else {
      out.bf16.insert(out.bf16.end(), p->bf16.begin(), p->bf16.end());
    }
  }
  return out;
}

}  // namespace muflow::engine::model
