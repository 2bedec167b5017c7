#include "engine/model/synthetic_model.hpp"

#include <cmath>

#include "absl/strings/match.h"
#include "engine/model/model_loader.hpp"
#include "kernels/assert.hpp"

namespace muflow::engine::model {

uint64_t fnv1a64(std::string_view text) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char ch : text) {
    h ^= static_cast<uint8_t>(ch);
    h *= 0x100000001B3ull;
  }
  return h;
}

void fill_synthetic(std::string_view name, uint64_t seed, float mean, float std, int64_t count,
                    std::vector<float>* out) {
  SplitMix64 rng{seed ^ fnv1a64(name)};
  const float half_width = std * std::sqrt(3.0f);
  out->resize(static_cast<size_t>(count));
  for (float& v : *out) v = mean + half_width * rng.uniform_pm1();
}

ModelWeights make_synthetic_model(const ModelConfig& config, uint64_t seed, DType matrix_dtype) {
  MUFLOW_ASSERT(config.validate().ok(), "make_synthetic_model needs a valid config");
  ModelWeights w;
  w.config = config;
  const float router_std = 1.0f / std::sqrt(static_cast<float>(config.hidden_size));
  for (HfTensorSlot& slot : hf_tensor_slots(&w)) {
    WeightTensor& t = *slot.tensor;
    t.name = slot.name;
    t.shape = slot.shape;
    int64_t count = 1;
    for (int64_t d : slot.shape) count *= d;
    const bool is_norm = absl::EndsWith(slot.name, "layernorm.weight") ||
                         slot.name == "model.norm.weight";
    const bool is_router = absl::EndsWith(slot.name, ".gate.weight");
    const float mean = is_norm ? 1.0f : 0.0f;
    const float std = is_norm ? 0.01f : (is_router ? router_std : 0.02f);
    std::vector<float> values;
    fill_synthetic(slot.name, seed, mean, std, count, &values);
    if (slot.f32_only || matrix_dtype == DType::kF32) {
      t.dtype = DType::kF32;
      t.f32 = std::move(values);
    } else {
      t.dtype = DType::kBF16;
      t.bf16.resize(values.size());
      for (size_t i = 0; i < values.size(); ++i) t.bf16[i] = f32_to_bf16(values[i]);
    }
  }
  if (config.tie_word_embeddings) {
    w.lm_head = w.embed;
    w.lm_head.name = "lm_head.weight";
  }
  return w;
}

}  // namespace muflow::engine::model
