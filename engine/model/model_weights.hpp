#pragma once
/// \file
/// All weights of an MoE model, by HF tensor name, in HF layout.

#include <memory>
#include <vector>

#include "engine/model/model_config.hpp"
#include "engine/model/weight_tensor.hpp"

namespace muflow::engine::model {

/// One SwiGLU FFN: y = down( silu(gate(x)) * up(x) ).
/// `gate`, `up`: [ffn, hidden]; `down`: [hidden, ffn].
/// HF names: mixtral `experts.{e}.w1/w3/w2`, qwen2_moe `experts.{e}.gate_proj/up_proj/down_proj`.
struct ExpertWeights {
  WeightTensor gate, up, down;
};

/// The weights of one transformer block (attention + MoE).
struct BlockWeights {
  WeightTensor input_norm;       ///< [hidden], f32
  WeightTensor post_attn_norm;   ///< [hidden], f32
  WeightTensor q, k, v;          ///< [heads*head_dim, hidden], [kv*head_dim, hidden] x2
  WeightTensor q_bias, k_bias, v_bias;  ///< [out] f32, empty unless attention_bias
  WeightTensor o;                ///< [hidden, heads*head_dim]
  WeightTensor router;           ///< [num_experts, hidden] (the gate)
  std::vector<ExpertWeights> experts;   ///< num_experts entries
  ExpertWeights shared_expert;          ///< empty tensors unless shared_expert_ffn > 0
  WeightTensor shared_expert_gate;      ///< [1, hidden], empty unless shared expert
};

/// A whole model. Vectors (norms, biases) are always float32; matrices keep the dtype they
/// were stored in (F32 or BF16). Immutable after loading; shared read-only by all devices
/// of one process through `std::shared_ptr<const ModelWeights>`.
struct ModelWeights {
  ModelConfig config;
  WeightTensor embed;        ///< [vocab, hidden] (`model.embed_tokens.weight`), f32
  WeightTensor final_norm;   ///< [hidden] (`model.norm.weight`), f32
  WeightTensor lm_head;      ///< [vocab, hidden] (`lm_head.weight`, or embed when tied)
  std::vector<BlockWeights> blocks;
};

}  // namespace muflow::engine::model
