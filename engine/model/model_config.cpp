#include "engine/model/model_config.hpp"

#include <cmath>

#include "absl/strings/str_format.h"
#include "engine/model/model_limits.hpp"

namespace muflow::engine::model {

const char* model_type_name(ModelType type) {
  switch (type) {
    case ModelType::kMixtral:
      return "mixtral";
    case ModelType::kQwen2Moe:
      return "qwen2_moe";
  }
  return "unknown";
}

namespace {

// Every message names the HF config.json key, since that is where users fix it.
absl::Status positive(const char* key, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("model config: %s must be positive, got %d", key, value));
}

}  // namespace

absl::Status ModelConfig::validate() const {
  const std::pair<const char*, int64_t> dims[] = {
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"num_hidden_layers", num_layers},
      {"num_attention_heads", num_heads},
      {"num_key_value_heads", num_kv_heads},
      {"head_dim", head_dim},
      {model_type == ModelType::kMixtral ? "num_local_experts" : "num_experts", num_experts},
      {"num_experts_per_tok", num_topk},
      {model_type == ModelType::kMixtral ? "intermediate_size" : "moe_intermediate_size",
       expert_ffn},
      {"max_position_embeddings", max_position_embeddings},
  };
  for (const auto& [key, value] : dims) {
    if (absl::Status s = positive(key, value); !s.ok()) return s;
  }
  // Bounds before anything is sized by these (model_limits.hpp).
  const int64_t limits[] = {kMaxVocab, kMaxHidden, kMaxLayers, kMaxHeads, kMaxHeads,
                            kMaxHeadDim, kMaxExperts, kMaxExperts, kMaxFfn, kMaxPositions};
  for (size_t i = 0; i < std::size(dims); ++i) {
    if (dims[i].second > limits[i]) {
      return absl::InvalidArgumentError(
          absl::StrFormat("model config: %s must be at most %d, got %d", dims[i].first,
                          limits[i], dims[i].second));
    }
  }
  if (shared_expert_ffn > kMaxFfn) {
    return absl::InvalidArgumentError(
        absl::StrFormat("model config: shared_expert_intermediate_size must be at most %d, got %d",
                        kMaxFfn, shared_expert_ffn));
  }
  if (num_heads % num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model config: num_key_value_heads (%d) must divide num_attention_heads (%d)",
        num_kv_heads, num_heads));
  }
  if (num_topk > num_experts) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model config: num_experts_per_tok (%d) must not exceed the number of experts (%d)",
        num_topk, num_experts));
  }
  if (shared_expert_ffn < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model config: shared_expert_intermediate_size must be >= 0, got %d",
        shared_expert_ffn));
  }
  if (model_type == ModelType::kMixtral) {
    // HF Mixtral cannot express these; a config that sets them would not round-trip.
    if (shared_expert_ffn != 0) {
      return absl::InvalidArgumentError(
          "model config: mixtral has no shared expert (shared_expert_intermediate_size must "
          "be 0)");
    }
    if (attention_bias) {
      return absl::InvalidArgumentError(
          "model config: mixtral has no attention bias (attention_bias must be false)");
    }
    if (!norm_topk_prob) {
      return absl::InvalidArgumentError(
          "model config: mixtral always renormalises top-k weights (norm_topk_prob must be "
          "true)");
    }
  }
  if (!(std::isfinite(rms_norm_eps) && rms_norm_eps > 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("model config: rms_norm_eps must be a positive number, got %g",
                        rms_norm_eps));
  }
  if (!(std::isfinite(rope_theta) && rope_theta > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model config: rope_theta must be a positive number, got %g", rope_theta));
  }
  const std::pair<const char*, int64_t> ids[] = {{"bos_token_id", bos_token_id},
                                                 {"eos_token_id", eos_token_id}};
  for (const auto& [key, value] : ids) {
    if (value < 0 || value >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "model config: %s (%d) must be in [0, vocab_size=%d)", key, value, vocab_size));
    }
  }
  return absl::OkStatus();
}

}  // namespace muflow::engine::model
