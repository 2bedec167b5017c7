#pragma once
/// \file
/// Weightless model presets for the sim backend (issue 3 item 4): the dims of well-known MoE
/// models as ModelConfig, so a simulation can size experts, attention and KV caches without a
/// model folder. Values are the public Hugging Face `config.json` values as recalled by the
/// author (not fetched when written; check against the hub before relying on a digit), with
/// each approximation stated below.
///
/// | name                | HF id                            | type      | what is approximated |
/// |---------------------|----------------------------------|-----------|----------------------|
/// | `mixtral-8x7b`      | mistralai/Mixtral-8x7B-v0.1      | mixtral   | sliding_window ignored
/// (null in v0.1) | | `qwen1.5-moe-a2.7b` | Qwen/Qwen1.5-MoE-A2.7B           | qwen2_moe | — | |
/// `switch-base-128`   | google/switch-base-128           | mixtral   | T5 encoder-decoder reduced
/// to its 6 encoder MoE layers; ReLU FFN counted as SwiGLU | | `deepseek-v2-lite`  |
/// deepseek-ai/DeepSeek-V2-Lite     | qwen2_moe | MLA as GQA; first dense layer as MoE |
/// `deepseek-v3` | deepseek-ai/DeepSeek-V3 | qwen2_moe | MLA as GQA; first 3 dense layers as MoE;
/// node-limited routing left to the router |
///
/// ModelType: kMixtral for routed-only models, kQwen2Moe for models with a shared expert
/// (the engine's two architectures; the sim only uses the dims).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.hpp"

namespace muflow::engine::model {

/// The names model_preset accepts (besides `synthetic-E<experts>-k<topk>`).
std::vector<std::string> model_preset_names();

/// The ModelConfig of a preset, validated with ModelConfig::validate().
///
/// - `mixtral-8x7b`: hidden 4096, 32 layers, 32 heads, 8 kv heads, head_dim 128, 8 experts
///   top-2, ffn 14336, vocab 32000, rms eps 1e-5, rope θ 1e6, 32768 positions, bos 1 / eos 2.
/// - `qwen1.5-moe-a2.7b`: hidden 2048, 24 layers, 16 heads, 16 kv heads, head_dim 128, 60
///   experts top-4, moe ffn 1408, shared expert 5632 (sigmoid-gated), norm_topk_prob false,
///   q/k/v bias, vocab 151936, rms eps 1e-6, rope θ 1e6, 8192 positions, bos = eos = 151643.
/// - `switch-base-128`: d_model 768, d_ff 3072, 128 experts top-1, 12 heads (= kv heads),
///   d_kv 64, vocab 32128, eps 1e-6, 512 positions, bos 0 (pad / decoder start) / eos 1;
///   6 layers = the encoder's MoE layers (every other encoder layer; the routing traces in
///   ../shared/data hold these 6). The real model is an encoder-decoder T5: its 6 dense
///   encoder layers and the decoder are not modelled, and its experts are 2-matrix ReLU FFNs
///   (768·3072·2 = 4.7 M params, 18.9 MB in fp32; HarMoEny quotes 18 MB) whereas
///   ModelConfig's experts are 3-matrix SwiGLU: a cost model counting gate+up+down
///   overestimates a Switch expert's FLOPs and bytes by 1.5× (expert_ffn 2048 would match).
/// - `switch-base-8`, `-16`, `-32`, `-64`: the same dims with 8…64 experts (the sizes of
///   HarMoEny's per-rank routing trace, ../shared/data/routing).
/// - `deepseek-v2-lite`: hidden 2048, 27 layers, 64 routed experts top-6, 2 shared experts
///   (shared_expert_ffn = 2 · 1408 = 2816), moe ffn 1408, norm_topk_prob false, vocab
///   102400, eps 1e-6, rope θ 10000, 163840 positions, bos 100000 / eos 100001.
///   Approximations: its multi-head latent attention (MLA: kv_lora_rank 512, qk_nope 128,
///   qk_rope 64, v 128, 16 heads) is modelled as GQA with 16 heads × head_dim 128 and 2 kv
///   heads, which keeps the KV cache per token and layer close (2·2·128 = 512 values vs MLA's
///   512 + 64 = 576) and the attention weights within ~1.5×; its first layer is dense
///   (first_k_dense_replace 1, ffn 10944) but is modelled as an MoE layer like the other 26.
/// - `deepseek-v3`: hidden 7168, 61 layers, 128 heads, 256 routed experts top-8, moe ffn
///   2048, one shared expert (shared_expert_ffn 2048), norm_topk_prob true, vocab 129280,
///   eps 1e-6, rope θ 10000, 163840 positions, bos 0 / eos 1. Approximations as for
///   V2-Lite: MLA (kv_lora_rank 512, q_lora_rank 1536, qk_rope 64) as GQA 128 heads × 128
///   with 2 kv heads (KV cache 512 vs 576 values per token and layer; the attention weights
///   are ~1.3× MLA's); the first 3 layers (first_k_dense_replace 3, ffn 18432) are modelled
///   as MoE layers; the node-limited routing (n_group 8, topk_group 4) and the routed scaling
///   factor are not modelled (the topology's router picks the experts).
/// - `synthetic-E<experts>-k<topk>` (e.g. `synthetic-E256-k8`): synthetic_model_preset with
///   those two counts and the other SyntheticPreset defaults.
/// Errors: NotFound for an unknown name (the message lists the names); InvalidArgument from
/// synthetic_model_preset for a bad synthetic name or counts.
absl::StatusOr<ModelConfig> model_preset(std::string_view name);

/// The dims of a synthetic model (routed experts only unless shared_expert_ffn > 0).
struct SyntheticPreset {
  int64_t num_experts = 64;  ///< 1..256
  int64_t num_topk = 2;      ///< 1..num_experts
  int64_t num_layers = 16;
  int64_t hidden_size = 2048;
  int64_t num_heads = 16;
  int64_t num_kv_heads = 4;
  int64_t head_dim = 128;
  int64_t expert_ffn = 1408;
  int64_t shared_expert_ffn = 0;  ///< > 0: a qwen2_moe-type shared expert of this width
  int64_t vocab_size = 32000;
};

/// A validated synthetic ModelConfig: kMixtral when shared_expert_ffn == 0, else kQwen2Moe
/// (norm_topk_prob true either way); bos 1, eos 2, eps 1e-5, rope θ 10000, 4096 positions.
/// Errors: InvalidArgument for num_experts ∉ [1, 256] or anything validate() rejects.
absl::StatusOr<ModelConfig> synthetic_model_preset(const SyntheticPreset& dims);

}  // namespace muflow::engine::model
