#pragma once
/// \file
/// Hugging Face `config.json` ⇄ ModelConfig, for model_type "mixtral" and "qwen2_moe".
///
/// Source: transformers' `MixtralConfig` and `Qwen2MoeConfig` (key names and defaults).

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "engine/model/model_config.hpp"

namespace muflow::engine::model {

/// Reads and validates an HF `config.json`.
///
/// Required keys (integers): model_type (string), vocab_size, hidden_size,
/// num_hidden_layers, num_attention_heads, num_experts_per_tok; mixtral: num_local_experts,
/// intermediate_size; qwen2_moe: num_experts, moe_intermediate_size,
/// shared_expert_intermediate_size.
/// Optional keys (HF default when absent or null): num_key_value_heads (= heads), head_dim
/// (= hidden / heads), rms_norm_eps (mixtral 1e-5, qwen2_moe 1e-6), rope_theta (mixtral 1e6,
/// qwen2_moe 1e4), max_position_embeddings (mixtral 131072, qwen2_moe 32768),
/// tie_word_embeddings (false), bos_token_id / eos_token_id (keep ModelConfig defaults; a list
/// of eos ids uses the first), norm_topk_prob (qwen2_moe only, false; mixtral is always
/// true), hidden_act (must be "silu"), rope_scaling (must be null), qwen2_moe
/// decoder_sparse_step (must be 1) and mlp_only_layers (must be empty).
/// qwen2_moe sets attention_bias (HF Qwen2 q/k/v carry a bias). sliding_window is ignored.
///
/// Errors (message starts with `path`): NotFound when the file is missing; InvalidArgument
/// for text that is not a JSON object, an unknown model_type, a missing required key, a key
/// of the wrong JSON type ("config.json: key 'hidden_size' must be an integer, got string"),
/// dense MLP layers ("dense MLP layers are not supported"), and `ModelConfig::validate`
/// failures. Thread-safe (no shared state).
absl::StatusOr<ModelConfig> parse_hf_config(const std::string& path);

/// As `parse_hf_config` on an already parsed JSON value; `source` prefixes error messages.
absl::StatusOr<ModelConfig> parse_hf_config_json(const nlohmann::json& config,
                                                 const std::string& source);

/// The inverse: an HF-compatible `config.json` object (with "architectures" and every key
/// `parse_hf_config` reads) for `config`. `torch_dtype` is written as given ("float32" or
/// "bfloat16"). `parse_hf_config_json(hf_config_json(c), s)` returns `c` for a valid `c`.
nlohmann::json hf_config_json(const ModelConfig& config,
                              const std::string& torch_dtype = "float32");

}  // namespace muflow::engine::model
