// Admission by free KV-cache memory (engine/serving/kv_admission.hpp, AsyncMoE §3.1).

#include "engine/serving/kv_admission.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace muflow::engine {
namespace {

TEST(KvAdmission, BytesPerTokenCountsKAndVOfEveryBlock) {
  model::ModelConfig c;
  c.num_layers = 32;
  c.num_kv_heads = 1;  // multi-query attention (AsyncMoE §5's Mixtral variant)
  c.head_dim = 128;
  EXPECT_EQ(serving::kv_bytes_per_token(c, 2), 32 * 2 * 1 * 128 * 2);
  c.num_kv_heads = 8;
  EXPECT_EQ(serving::kv_bytes_per_token(c, 4), 32 * 2 * 8 * 128 * 4);
}

TEST(KvAdmission, ResidentWeightsOfMixtral8x7bMatchItsParameterCount) {
  // Mixtral-8x7B has 46.7 B parameters (Mistral AI): all of them on one device.
  model::ModelConfig c;
  c.vocab_size = 32000;
  c.hidden_size = 4096;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.num_experts = 8;
  c.num_topk = 2;
  c.expert_ffn = 14336;
  const double params = static_cast<double>(serving::resident_weight_bytes(c, true, 8, 1));
  EXPECT_NEAR(params / 1e9, 46.7, 0.1);
  // Only experts: 8 · 32 · 3 · 4096 · 14336 ≈ 45.1 B.
  EXPECT_EQ(serving::resident_weight_bytes(c, false, 8, 1), int64_t{8} * 32 * 3 * 4096 * 14336);
  EXPECT_EQ(serving::resident_weight_bytes(c, false, 0, 2), 0);
}

TEST(KvAdmission, PicksTheRankWithTheMostFreeMemory) {
  std::vector<serving::RankKv> ranks = {{1000, 600, 3}, {1000, 100, 5}, {800, 0, 0}};
  // Free: 400, 900, 800 → rank 1 although it has the most requests.
  EXPECT_EQ(serving::pick_rank_most_free_kv(ranks, 64, 100), 1);
  // A request that fits only on rank 1.
  EXPECT_EQ(serving::pick_rank_most_free_kv(ranks, 64, 850), 1);
  // Nobody can hold it.
  EXPECT_EQ(serving::pick_rank_most_free_kv(ranks, 64, 901), -1);
  // The request limit excludes rank 1 (5 active).
  EXPECT_EQ(serving::pick_rank_most_free_kv(ranks, 5, 100), 2);
}

TEST(KvAdmission, TiesGoToFewerRequestsThenTheLowerRank) {
  std::vector<serving::RankKv> ranks = {{-1, 0, 2}, {-1, 0, 1}, {-1, 0, 1}};
  EXPECT_EQ(serving::pick_rank_most_free_kv(ranks, 64, 10), 1);
  // Unlimited capacity: the least reserved rank is the freest.
  ranks = {{-1, 50, 1}, {-1, 40, 1}, {-1, 45, 0}};
  EXPECT_EQ(serving::pick_rank_most_free_kv(ranks, 64, 10), 1);
  EXPECT_EQ(serving::pick_rank_most_free_kv({}, 64, 10), -1);
}

}  // namespace
}  // namespace muflow::engine
