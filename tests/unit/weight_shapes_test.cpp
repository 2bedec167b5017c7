// engine/model/weight_shapes: the shape checks cpu and cuda run before preparing a model, and
// the fused q|k|v bias both read.
#include "engine/model/weight_shapes.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/model/synthetic_model.hpp"

namespace muflow {
namespace {

using engine::model::ModelConfig;
using engine::model::ModelWeights;
using ::testing::HasSubstr;

ModelConfig small(bool qwen) {
  ModelConfig c;
  c.model_type = qwen ? engine::model::ModelType::kQwen2Moe : engine::model::ModelType::kMixtral;
  c.vocab_size = 50;
  c.hidden_size = 16;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 8;
  c.num_experts = 3;
  c.num_topk = 2;
  c.expert_ffn = 24;
  if (qwen) {
    c.shared_expert_ffn = 20;
    c.attention_bias = true;
  }
  return c;
}

std::string message(const absl::Status& s) { return std::string(s.message()); }

TEST(WeightShapes, ASyntheticModelPasses) {
  for (bool qwen : {false, true}) {
    const ModelWeights w =
        engine::model::make_synthetic_model(small(qwen), 3, engine::model::DType::kF32);
    EXPECT_TRUE(engine::model::check_weight_shapes(w).ok()) << (qwen ? "qwen" : "mixtral");
  }
}

TEST(WeightShapes, AWrongTensorIsNamedWithBothShapes) {
  ModelWeights w = engine::model::make_synthetic_model(small(false), 3, engine::model::DType::kF32);
  w.blocks[1].experts[2].down.shape = {16, 23};
  w.blocks[1].experts[2].down.name = "model.layers.1.block_sparse_moe.experts.2.w2.weight";
  const absl::Status s = engine::model::check_weight_shapes(w);
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(message(s), HasSubstr("tensor 'model.layers.1.block_sparse_moe.experts.2.w2.weight' "
                                    "has shape [16,23], expected [16,24]"));
  ModelWeights shared =
      engine::model::make_synthetic_model(small(true), 3, engine::model::DType::kF32);
  shared.blocks[0].shared_expert_gate.shape = {2, 16};
  EXPECT_THAT(message(engine::model::check_weight_shapes(shared)), HasSubstr("expected [1,16]"));
}

TEST(WeightShapes, BlockAndExpertCountsAreChecked) {
  ModelWeights w = engine::model::make_synthetic_model(small(false), 3, engine::model::DType::kF32);
  ModelWeights fewer_experts = w;
  fewer_experts.blocks[0].experts.pop_back();
  EXPECT_THAT(message(engine::model::check_weight_shapes(fewer_experts)),
              HasSubstr("block 0 has 2 experts, config says 3"));
  w.blocks.pop_back();
  EXPECT_THAT(message(engine::model::check_weight_shapes(w)),
              HasSubstr("model has 1 blocks, config says num_hidden_layers = 2"));
}

TEST(WeightShapes, FusedQkvBiasConcatenatesOrNamesWhatIsMissing) {
  const ModelConfig mixtral = small(false);
  const ModelWeights m =
      engine::model::make_synthetic_model(mixtral, 3, engine::model::DType::kF32);
  absl::StatusOr<std::vector<float>> none = engine::model::fused_qkv_bias(mixtral, m.blocks[0], 0);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());

  const ModelConfig qwen = small(true);
  ModelWeights q = engine::model::make_synthetic_model(qwen, 3, engine::model::DType::kF32);
  absl::StatusOr<std::vector<float>> bias = engine::model::fused_qkv_bias(qwen, q.blocks[1], 1);
  ASSERT_TRUE(bias.ok()) << bias.status();
  ASSERT_EQ(bias->size(), 16u + 8u + 8u);
  const std::vector<float> qb = q.blocks[1].q_bias.to_f32(), vb = q.blocks[1].v_bias.to_f32();
  EXPECT_EQ((*bias)[0], qb[0]);
  EXPECT_EQ((*bias)[31], vb[7]);
  q.blocks[1].k_bias = engine::model::WeightTensor{};
  q.blocks[1].k_bias.name = "model.layers.1.self_attn.k_proj.bias";
  EXPECT_THAT(message(engine::model::fused_qkv_bias(qwen, q.blocks[1], 1).status()),
              HasSubstr("tensor 'model.layers.1.self_attn.k_proj.bias' missing or empty"));
}

// concat_rows (the fused q|k|v weight both backends upload): rows in part order, bf16 kept
// when every part is bf16, else every part widened to f32 exactly.
TEST(WeightShapes, ConcatRowsStacksPartsInOrderKeepingBf16OnlyWhenAllAre) {
  using engine::model::DType;
  using engine::model::WeightTensor;
  WeightTensor a, b, c;
  a.dtype = b.dtype = DType::kBF16;
  a.shape = {1, 2};
  a.bf16 = {0x3f80, 0x4000};  // 1, 2
  b.shape = {2, 2};
  b.bf16 = {0x4040, 0x4080, 0x40a0, 0x40c0};  // 3 .. 6
  c.dtype = DType::kF32;
  c.shape = {1, 2};
  c.f32 = {7.f, 8.5f};
  const WeightTensor ab = engine::model::concat_rows({&a, &b});
  EXPECT_EQ(ab.dtype, DType::kBF16);
  EXPECT_EQ(ab.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(ab.bf16, (std::vector<uint16_t>{0x3f80, 0x4000, 0x4040, 0x4080, 0x40a0, 0x40c0}));
  const WeightTensor mixed = engine::model::concat_rows({&c, &a});
  EXPECT_EQ(mixed.dtype, DType::kF32);
  EXPECT_EQ(mixed.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(mixed.f32, (std::vector<float>{7.f, 8.5f, 1.f, 2.f}));
  EXPECT_TRUE(mixed.bf16.empty());
}

}  // namespace
}  // namespace muflow
