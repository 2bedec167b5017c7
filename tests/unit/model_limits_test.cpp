// #15: model dims from config.json, topology files and make-model are bounded before any
// allocation, and weights that cannot fit this machine's memory are refused up front with a
// clear error instead of an OOM kill.
#include <limits>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/model/model_config.hpp"
#include "engine/model/model_limits.hpp"
#include "engine/model/model_memory.hpp"
#include "engine/serving/kv_admission.hpp"

namespace muflow::engine {
namespace {

using ::testing::HasSubstr;

model::ModelConfig small() {
  model::ModelConfig c;
  c.vocab_size = 512;
  c.hidden_size = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.num_experts = 8;
  c.num_topk = 2;
  c.expert_ffn = 96;
  return c;
}

std::string msg(const absl::Status& s) { return std::string(s.message()); }

TEST(ModelLimits, ValidateBoundsEveryDimension) {
  ASSERT_TRUE(small().validate().ok());
  model::ModelConfig c = small();
  c.num_experts = 1000000;
  EXPECT_THAT(msg(c.validate()),
              HasSubstr("num_local_experts must be at most 4096, got 1000000"));
  c = small();
  c.num_layers = 1000000000;
  EXPECT_THAT(msg(c.validate()), HasSubstr("num_hidden_layers must be at most 1024"));
  c = small();
  c.vocab_size = int64_t{3} << 30;  // token ids would not fit int32
  EXPECT_THAT(msg(c.validate()), HasSubstr("vocab_size must be at most 4194304"));
  c = small();
  c.hidden_size = std::numeric_limits<int64_t>::max();  // config.json's 2^63 - 1
  EXPECT_THAT(msg(c.validate()), HasSubstr("hidden_size must be at most 65536, got "
                                           "9223372036854775807"));
  c = small();
  c.expert_ffn = model::kMaxFfn;  // at the bound: fine
  EXPECT_TRUE(c.validate().ok());
}

TEST(ModelLimits, WeightBytesCountEveryTensor) {
  // small(): vocab 512, hidden 64, 2 layers, 4 heads / 2 kv heads of 16, 8 experts of ffn 96.
  const double per_block = 64.0 * (4 + 2 * 2) * 16  // q, k, v
                           + 4 * 16 * 64.0           // o
                           + 64.0 * 8                // router
                           + 2 * 64.0                // the two norms
                           + 8 * 3 * 64.0 * 96;      // gate, up, down of every expert
  const double embeddings = 512 * 64.0 * 2 + 64;     // embed, LM head, final norm
  EXPECT_EQ(model::model_weight_bytes(small(), 4.0), (2 * per_block + embeddings) * 4);
  // A device without attention holds only its experts.
  EXPECT_EQ(model::weight_bytes(small(), false, 3, 2.0), 2 * 3 * 3 * 64.0 * 96 * 2);
}

TEST(ModelLimits, WeightBytesAgreeWithTheResidentWeightsOfAllDevices) {
  // Two independent formulas: every weight (model_memory) and the weights a device hosting
  // attention and all experts keeps (kv_admission).
  model::ModelConfig c = small();
  for (bool tie : {false, true}) {
    c.tie_word_embeddings = tie;
    for (int64_t shared : {0, 80}) {
      c.shared_expert_ffn = shared;
      EXPECT_EQ(model::model_weight_bytes(c, 4.0),
                static_cast<double>(serving::resident_weight_bytes(c, true, c.num_experts, 4)));
    }
  }
}

TEST(ModelLimits, WeightsThatCannotFitAreRefusedBeforeAllocation) {
  model::ModelConfig c = small();
  EXPECT_TRUE(model::check_weights_fit_in_memory(c, 4.0, 2.0, "t.toml: [model]").ok());
  // Every dim at its bound: far more than any machine.
  c.vocab_size = model::kMaxVocab;
  c.hidden_size = model::kMaxHidden;
  c.num_layers = model::kMaxLayers;
  c.num_experts = model::kMaxExperts;
  c.expert_ffn = model::kMaxFfn;
  ASSERT_TRUE(c.validate().ok());
  const absl::Status s = model::check_weights_fit_in_memory(c, 4.0, 2.0, "t.toml: [model]");
  if (model::physical_memory_bytes() <= 0) GTEST_SKIP() << "physical memory unknown here";
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(msg(s), HasSubstr("t.toml: [model]: the model's weights need"));
  EXPECT_THAT(msg(s), HasSubstr("of this machine's"));
  // The same dims stay exact in int64 for the sim's per-device memory model.
  EXPECT_EQ(static_cast<double>(serving::resident_weight_bytes(c, true, c.num_experts, 4)),
            model::model_weight_bytes(c, 4.0));
}

}  // namespace
}  // namespace muflow::engine
