#pragma once
/// \file
/// Architecture hyper-parameters of a decoder-only MoE model (Hugging Face `config.json`).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace muflow::engine::model {

/// Supported architectures: HF `model_type` "mixtral" and "qwen2_moe".
enum class ModelType { kMixtral, kQwen2Moe };

/// Returns "mixtral" or "qwen2_moe".
const char* model_type_name(ModelType type);

/// The dims of one MoE transformer. Every block is attention + MoE (no dense blocks).
///
/// Mixtral (HF `MixtralForCausalLM`): top-k weights always renormalised, no shared expert,
/// no attention bias. Qwen2-MoE (HF `Qwen2MoeForCausalLM`): q/k/v bias, a shared expert
/// gated by sigmoid(x · w_gate), `norm_topk_prob` usually false.
struct ModelConfig {
  ModelType model_type = ModelType::kMixtral;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;            ///< `hidden_size`
  int64_t num_layers = 0;             ///< `num_hidden_layers` (= MoE blocks)
  int64_t num_heads = 0;              ///< `num_attention_heads`
  int64_t num_kv_heads = 0;           ///< `num_key_value_heads` (GQA groups)
  int64_t head_dim = 0;               ///< `head_dim`, default hidden_size / num_heads
  int64_t num_experts = 0;            ///< `num_local_experts` (mixtral) / `num_experts` (qwen)
  int64_t num_topk = 0;               ///< `num_experts_per_tok`
  int64_t expert_ffn = 0;             ///< `intermediate_size` (mixtral) / `moe_intermediate_size`
  int64_t shared_expert_ffn = 0;      ///< `shared_expert_intermediate_size`; 0 = none
  /// Experts are gated (SwiGLU: gate, up, down) as in Mixtral/Qwen; false = two-matrix FFN
  /// (Switch Transformer's ReLU expert). Only simulated models may set false (cost model).
  bool gated_experts = true;
  bool norm_topk_prob = true;         ///< renormalise the top-k weights to sum to 1
  bool attention_bias = false;        ///< q/k/v projections carry a bias (qwen2_moe)
  bool tie_word_embeddings = false;   ///< lm_head shares embed_tokens
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  int64_t max_position_embeddings = 4096;
  int64_t bos_token_id = 1;
  int64_t eos_token_id = 2;

  /// Checks that dims are positive and consistent (heads divisible by kv heads, top-k ≤
  /// experts). Returns InvalidArgument naming the offending key.
  absl::Status validate() const;
};

}  // namespace muflow::engine::model
