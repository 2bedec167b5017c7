// MoEShard shards on the cpu backend: slicing keeps the right rows/columns, and the sum of
// the shards' partial outputs equals the unsharded expert up to float reassociation.
#include <cmath>

#include <gtest/gtest.h>

#include "engine/exec/cpu_expert_shards.hpp"
#include "engine/exec/cpu_model.hpp"
#include "engine/model/synthetic_model.hpp"

namespace muflow::engine {
namespace {

model::ModelConfig tiny() {
  model::ModelConfig c;
  c.vocab_size = 50;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 16;
  c.num_experts = 3;
  c.num_topk = 1;
  c.expert_ffn = 41;  // prime: uneven shards
  return c;
}

TEST(CpuExpertShards, SliceTakesRowsOfGateUpAndColumnsOfDown) {
  model::ExpertWeights e;
  e.gate = {"g", model::DType::kF32, {3, 2}, {1, 2, 3, 4, 5, 6}, {}};
  e.up = {"u", model::DType::kF32, {3, 2}, {7, 8, 9, 10, 11, 12}, {}};
  e.down = {"d", model::DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6}, {}};
  model::ExpertWeights s = exec::slice_expert(e, {1, 3});
  EXPECT_EQ(s.gate.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(s.gate.f32, (std::vector<float>{3, 4, 5, 6}));
  EXPECT_EQ(s.up.f32, (std::vector<float>{9, 10, 11, 12}));
  EXPECT_EQ(s.down.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(s.down.f32, (std::vector<float>{2, 3, 5, 6}));
}

TEST(CpuExpertShards, ShardSumMatchesTheExpert) {
  for (model::DType dtype : {model::DType::kF32, model::DType::kBF16}) {
    auto weights =
        std::make_shared<const model::ModelWeights>(model::make_synthetic_model(tiny(), 5, dtype));
    auto model = exec::CpuModel::prepare(weights);
    ASSERT_TRUE(model.ok()) << model.status();
    for (int64_t shards : {1, 2, 4, 6, 50}) {  // 50 > ffn: empty shards
      auto sh = exec::CpuExpertShards::prepare(*weights, shards);
      ASSERT_TRUE(sh.ok()) << sh.status();
      const int64_t n = 5, H = 32;
      std::vector<float> x(n * H);
      for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * static_cast<double>(i));
      for (int64_t b = 0; b < 2; ++b) {
        for (int64_t e = 0; e < 3; ++e) {
          std::vector<float> full(n * H), sum(n * H, 0.f), part(n * H);
          (*model)->expert(b, e, x.data(), n, full.data());
          for (int64_t d = 0; d < shards; ++d) {
            (*sh)->forward(b, e, d, x.data(), n, part.data());
            for (int64_t j = 0; j < n * H; ++j) sum[j] += part[j];
          }
          for (int64_t j = 0; j < n * H; ++j) {
            EXPECT_NEAR(sum[j], full[j], 1e-5 * std::max(1.f, std::abs(full[j])))
                << "shards " << shards << " block " << b << " expert " << e;
          }
        }
      }
    }
  }
  auto weights = std::make_shared<const model::ModelWeights>(
      model::make_synthetic_model(tiny(), 5, model::DType::kF32));
  EXPECT_FALSE(exec::CpuExpertShards::prepare(*weights, 0).ok());
}

}  // namespace
}  // namespace muflow::engine
