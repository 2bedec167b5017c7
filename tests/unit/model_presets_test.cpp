// Weightless model presets (engine/model/model_presets.hpp): every preset validates and has the
// documented dims; synthetic presets up to 256 experts; unknown names and bad synthetic dims.

#include "engine/model/model_presets.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace muflow::engine {
namespace {

using ::testing::HasSubstr;

model::ModelConfig get(std::string_view name) {
  absl::StatusOr<model::ModelConfig> c = model::model_preset(name);
  EXPECT_TRUE(c.ok()) << name << ": " << c.status();
  return c.ok() ? *c : model::ModelConfig{};
}

TEST(ModelPresets, EveryNamedPresetValidates) {
  ASSERT_EQ(model::model_preset_names().size(), 9u);
  for (const std::string& name : model::model_preset_names()) {
    absl::StatusOr<model::ModelConfig> c = model::model_preset(name);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status();
    EXPECT_TRUE(c->validate().ok()) << name;
    // Routed-only presets are mixtral-type, shared-expert presets qwen2_moe-type.
    EXPECT_EQ(c->model_type == model::ModelType::kQwen2Moe, c->shared_expert_ffn > 0) << name;
  }
}

TEST(ModelPresets, Mixtral8x7b) {
  const model::ModelConfig c = get("mixtral-8x7b");
  EXPECT_EQ(c.model_type, model::ModelType::kMixtral);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_topk, 2);
  EXPECT_EQ(c.expert_ffn, 14336);
  EXPECT_EQ(c.shared_expert_ffn, 0);
  EXPECT_EQ(c.vocab_size, 32000);
}

TEST(ModelPresets, Qwen15MoeA27b) {
  const model::ModelConfig c = get("qwen1.5-moe-a2.7b");
  EXPECT_EQ(c.model_type, model::ModelType::kQwen2Moe);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_layers, 24);
  EXPECT_EQ(c.num_heads, 16);
  EXPECT_EQ(c.num_kv_heads, 16);
  EXPECT_EQ(c.num_experts, 60);
  EXPECT_EQ(c.num_topk, 4);
  EXPECT_EQ(c.expert_ffn, 1408);
  EXPECT_EQ(c.shared_expert_ffn, 5632);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_TRUE(c.attention_bias);
}

TEST(ModelPresets, SwitchBase128) {
  const model::ModelConfig c = get("switch-base-128");
  EXPECT_EQ(c.model_type, model::ModelType::kMixtral);
  EXPECT_EQ(c.hidden_size, 768);
  EXPECT_EQ(c.expert_ffn, 3072);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_topk, 1);
  EXPECT_EQ(c.num_heads, 12);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_layers, 6);  // the encoder's MoE layers, as in HarMoEny's traces
}

TEST(ModelPresets, SwitchBaseSizes) {
  for (int64_t e : {8, 16, 32, 64}) {
    const model::ModelConfig c = get("switch-base-" + std::to_string(e));
    EXPECT_EQ(c.num_experts, e);
    EXPECT_EQ(c.hidden_size, 768);
    EXPECT_EQ(c.num_layers, 6);
  }
  EXPECT_FALSE(model::model_preset("switch-base-12").ok());
}

TEST(ModelPresets, DeepseekV2Lite) {
  const model::ModelConfig c = get("deepseek-v2-lite");
  EXPECT_EQ(c.model_type, model::ModelType::kQwen2Moe);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_layers, 27);
  EXPECT_EQ(c.num_experts, 64);
  EXPECT_EQ(c.num_topk, 6);
  EXPECT_EQ(c.expert_ffn, 1408);
  EXPECT_EQ(c.shared_expert_ffn, 2 * 1408);
  EXPECT_EQ(c.num_heads, 16);
  // MLA as GQA: KV cache values per token and layer 2·kv·head_dim close to MLA's 512 + 64.
  EXPECT_EQ(2 * c.num_kv_heads * c.head_dim, 512);
  EXPECT_EQ(c.vocab_size, 102400);
}

TEST(ModelPresets, DeepseekV3) {
  const model::ModelConfig c = get("deepseek-v3");
  EXPECT_EQ(c.model_type, model::ModelType::kQwen2Moe);
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.num_layers, 61);
  EXPECT_EQ(c.num_experts, 256);
  EXPECT_EQ(c.num_topk, 8);
  EXPECT_EQ(c.expert_ffn, 2048);
  EXPECT_EQ(c.shared_expert_ffn, 2048);
  EXPECT_EQ(c.num_heads, 128);
  EXPECT_EQ(2 * c.num_kv_heads * c.head_dim, 512);
  EXPECT_EQ(c.vocab_size, 129280);
}

TEST(ModelPresets, Synthetic) {
  model::SyntheticPreset dims;
  dims.num_experts = 256;
  dims.num_topk = 8;
  absl::StatusOr<model::ModelConfig> c = model::synthetic_model_preset(dims);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_experts, 256);
  EXPECT_EQ(c->model_type, model::ModelType::kMixtral);
  dims.shared_expert_ffn = 512;
  c = model::synthetic_model_preset(dims);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model_type, model::ModelType::kQwen2Moe);

  dims.num_experts = 257;
  EXPECT_THAT(model::synthetic_model_preset(dims).status().message(), HasSubstr("[1, 256]"));
  dims.num_experts = 16;
  dims.num_topk = 17;
  EXPECT_THAT(model::synthetic_model_preset(dims).status().message(),
              HasSubstr("num_experts_per_tok"));
  dims.num_topk = 2;
  dims.num_kv_heads = 3;
  EXPECT_FALSE(model::synthetic_model_preset(dims).ok());

  const model::ModelConfig n = get("synthetic-E128-k4");
  EXPECT_EQ(n.num_experts, 128);
  EXPECT_EQ(n.num_topk, 4);
  EXPECT_FALSE(model::model_preset("synthetic-E300-k4").ok());
  EXPECT_THAT(model::model_preset("synthetic-128").status().message(),
              HasSubstr("synthetic-E<experts>-k<topk>"));
}

TEST(ModelPresets, UnknownName) {
  absl::StatusOr<model::ModelConfig> c = model::model_preset("gpt-4");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr("mixtral-8x7b"));
}

}  // namespace
}  // namespace muflow::engine
