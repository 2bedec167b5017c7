#include "engine/model/model_presets.hpp"

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace muflow::engine::model {
namespace {

// mistralai/Mixtral-8x7B-v0.1 config.json.
ModelConfig mixtral_8x7b() {
  ModelConfig c;
  c.model_type = ModelType::kMixtral;
  c.vocab_size = 32000;
  c.hidden_size = 4096;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.num_experts = 8;
  c.num_topk = 2;
  c.expert_ffn = 14336;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 1e6f;
  c.max_position_embeddings = 32768;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

// Qwen/Qwen1.5-MoE-A2.7B config.json.
ModelConfig qwen15_moe_a27b() {
  ModelConfig c;
  c.model_type = ModelType::kQwen2Moe;
  c.vocab_size = 151936;
  c.hidden_size = 2048;
  c.num_layers = 24;
  c.num_heads = 16;
  c.num_kv_heads = 16;
  c.head_dim = 128;
  c.num_experts = 60;
  c.num_topk = 4;
  c.expert_ffn = 1408;
  c.shared_expert_ffn = 5632;
  c.norm_topk_prob = false;
  c.attention_bias = true;
  c.rms_norm_eps = 1e-6f;
  c.rope_theta = 1e6f;
  c.max_position_embeddings = 8192;
  c.bos_token_id = 151643;
  c.eos_token_id = 151643;
  return c;
}

// google/switch-base-{8,...,128} config.json (d_model, d_ff, d_kv, num_heads, num_experts,
// num_sparse_encoder_layers, vocab_size, layer_norm_epsilon, pad/eos ids).
ModelConfig switch_base(int64_t num_experts) {
  ModelConfig c;
  c.model_type = ModelType::kMixtral;
  c.vocab_size = 32128;
  c.hidden_size = 768;
  c.num_layers = 6;
  c.num_heads = 12;
  c.num_kv_heads = 12;
  c.head_dim = 64;
  c.num_experts = num_experts;
  c.num_topk = 1;
  c.expert_ffn = 3072;
  c.gated_experts = false;  // Switch experts are 2-matrix ReLU FFNs (wi, wo)
  c.rms_norm_eps = 1e-6f;
  // T5 uses relative position buckets (no hard limit); HarMoEny runs 1024-token sequences.
  c.max_position_embeddings = 4096;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  return c;
}

// deepseek-ai/DeepSeek-V2-Lite config.json; MLA approximated by GQA (see the header).
ModelConfig deepseek_v2_lite() {
  ModelConfig c;
  c.model_type = ModelType::kQwen2Moe;
  c.vocab_size = 102400;
  c.hidden_size = 2048;
  c.num_layers = 27;
  c.num_heads = 16;
  c.num_kv_heads = 2;
  c.head_dim = 128;
  c.num_experts = 64;
  c.num_topk = 6;
  c.expert_ffn = 1408;
  c.shared_expert_ffn = int64_t{2} * 1408;  // n_shared_experts × moe_intermediate_size
  c.norm_topk_prob = false;
  c.rms_norm_eps = 1e-6f;
  c.rope_theta = 10000.0f;
  c.max_position_embeddings = 163840;
  c.bos_token_id = 100000;
  c.eos_token_id = 100001;
  return c;
}

// deepseek-ai/DeepSeek-V3 config.json (hidden 7168, 61 layers, 128 heads, 256 routed experts
// top-8 of moe_intermediate_size 2048, one shared expert of 2048, vocab 129280). As for
// V2-Lite, MLA is approximated by GQA (2 kv heads × 128: a KV cache of 512 values per
// token-layer vs MLA's kv_lora_rank + qk_rope_head_dim = 576) and the first_k_dense_replace = 3
// dense layers are modelled as MoE layers; the node-limited routing (n_group 8, topk_group 4)
// is not modelled (the topology's router picks the experts).
ModelConfig deepseek_v3() {
  ModelConfig c;
  c.model_type = ModelType::kQwen2Moe;
  c.vocab_size = 129280;
  c.hidden_size = 7168;
  c.num_layers = 61;
  c.num_heads = 128;
  c.num_kv_heads = 2;
  c.head_dim = 128;
  c.num_experts = 256;
  c.num_topk = 8;
  c.expert_ffn = 2048;
  c.shared_expert_ffn = 2048;  // n_shared_experts (1) × moe_intermediate_size
  c.norm_topk_prob = true;
  c.rms_norm_eps = 1e-6f;
  c.rope_theta = 10000.0f;
  c.max_position_embeddings = 163840;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  return c;
}

}  // namespace

std::vector<std::string> model_preset_names() {
  return {"mixtral-8x7b",    "qwen1.5-moe-a2.7b", "switch-base-8",
          "switch-base-16",  "switch-base-32",    "switch-base-64",
          "switch-base-128", "deepseek-v2-lite",  "deepseek-v3"};
}

absl::StatusOr<ModelConfig> synthetic_model_preset(const SyntheticPreset& dims) {
  if (dims.num_experts < 1 || dims.num_experts > 256) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "synthetic model: num_experts must be in [1, 256], got %d", dims.num_experts));
  }
  ModelConfig c;
  c.model_type = dims.shared_expert_ffn > 0 ? ModelType::kQwen2Moe : ModelType::kMixtral;
  c.vocab_size = dims.vocab_size;
  c.hidden_size = dims.hidden_size;
  c.num_layers = dims.num_layers;
  c.num_heads = dims.num_heads;
  c.num_kv_heads = dims.num_kv_heads;
  c.head_dim = dims.head_dim;
  c.num_experts = dims.num_experts;
  c.num_topk = dims.num_topk;
  c.expert_ffn = dims.expert_ffn;
  c.shared_expert_ffn = dims.shared_expert_ffn;
  if (absl::Status s = c.validate(); !s.ok()) return s;
  return c;
}

absl::StatusOr<ModelConfig> model_preset(std::string_view name) {
  ModelConfig c;
  if (name == "mixtral-8x7b") {
    c = mixtral_8x7b();
  } else if (name == "qwen1.5-moe-a2.7b") {
    c = qwen15_moe_a27b();
  } else if (name == "switch-base-8" || name == "switch-base-16" || name == "switch-base-32" ||
             name == "switch-base-64" || name == "switch-base-128") {
    const std::string_view digits = name.substr(std::string_view("switch-base-").size());
    int64_t experts = 0;
    (void)absl::SimpleAtoi(absl::string_view(digits.data(), digits.size()), &experts);
    c = switch_base(experts);
  } else if (name == "deepseek-v2-lite") {
    c = deepseek_v2_lite();
  } else if (name == "deepseek-v3") {
    c = deepseek_v3();
  } else if (absl::string_view rest(name.data(), name.size());
             absl::ConsumePrefix(&rest, "synthetic-")) {
    // synthetic-E<experts>-k<topk>
    std::vector<absl::string_view> parts = absl::StrSplit(rest, '-');
    SyntheticPreset dims;
    if (parts.size() != 2 || !absl::ConsumePrefix(&parts[0], "E") ||
        !absl::ConsumePrefix(&parts[1], "k") || !absl::SimpleAtoi(parts[0], &dims.num_experts) ||
        !absl::SimpleAtoi(parts[1], &dims.num_topk)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "model preset '%s': expected synthetic-E<experts>-k<topk>, e.g. synthetic-E256-k8",
          std::string(name)));
    }
    return synthetic_model_preset(dims);
  } else {
    return absl::NotFoundError(absl::StrFormat(
        "unknown model preset '%s'; expected one of %s or synthetic-E<experts>-k<topk>",
        std::string(name), absl::StrJoin(model_preset_names(), ", ")));
  }
  if (absl::Status s = c.validate(); !s.ok()) return s;
  return c;
}

}  // namespace muflow::engine::model
