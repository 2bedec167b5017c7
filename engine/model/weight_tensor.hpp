#pragma once
/// \file
/// Host-resident weight tensors as loaded from a safetensors file.

#include <cstdint>
#include <string>
#include <vector>

namespace muflow::engine::model {

/// Element type of a stored weight. Activations are always float32.
enum class DType { kF32, kBF16 };

/// Returns "F32" or "BF16" (the safetensors spelling).
const char* dtype_name(DType dtype);

/// Converts one bfloat16 bit pattern to float32 (exact).
inline float bf16_to_f32(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}

/// Rounds a float32 to the nearest bfloat16 (ties to even), as PyTorch does.
uint16_t f32_to_bf16(float value);

/// A dense row-major tensor owned by host memory.
///
/// Exactly one of `f32` / `bf16` holds `numel()` elements, selected by `dtype`. Matrices
/// keep HF's layout: a linear layer's weight is `[out_features, in_features]`.
/// Owned by the model that loaded it; read-only after loading, so any thread may read it.
struct WeightTensor {
  std::string name;              ///< HF tensor name, e.g. "model.layers.0.self_attn.q_proj.weight"
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;    ///< empty when the tensor is absent (e.g. no q bias)
  std::vector<float> f32;        ///< elements when dtype == kF32
  std::vector<uint16_t> bf16;    ///< raw bfloat16 bits when dtype == kBF16

  bool empty() const { return shape.empty(); }
  int64_t numel() const;
  int64_t rows() const { return shape.empty() ? 0 : shape.front(); }
  int64_t cols() const { return shape.size() < 2 ? 0 : shape.back(); }
  /// All elements as float32 (a copy; exact for bf16).
  std::vector<float> to_f32() const;
};

/// Matrices [rows_i, cols] stacked into one [Σ rows_i, cols] (e.g. q, k and v as one fused
/// projection): bf16 when every part is, else f32 (bf16 parts widened exactly). A copy; no
/// name. Preconditions (the caller's: shapes come checked from engine/model/weight_shapes):
/// `parts` non-empty, all with the same cols; aborts (MUFLOW_ASSERT) otherwise. Any thread.
WeightTensor concat_rows(const std::vector<const WeightTensor*>& parts);

}  // namespace muflow::engine::model
