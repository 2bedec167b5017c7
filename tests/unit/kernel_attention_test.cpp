// Tests for kernels/cpu/attention.hpp against kernels/reference/attention.hpp.
// Tolerance policy (gqa_attention): |out − out_ref| ≤ 2e-5 · max|v| + 1e-7 per element (f32
// dot products and softmax sums in position order vs an all-double reference; the output is a
// convex combination of V rows, so max|v| is its natural scale).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "kernels/reference/attention.hpp"
#include "kernels/reference/test_inputs.hpp"

namespace muflow::kernels::cpu {
namespace {

using reference::random_floats;
using reference::SplitMix64;

struct AttentionCase {
  int64_t ctx_len, num_heads, num_kv_heads, head_dim;
};

/// One case's query and KV cache: q uniform in ±q_scale, K in ±1, V in ±3 (drawn in that
/// order from `rng`).
struct AttentionInputs {
  std::vector<float> q, k, v;
};

AttentionInputs random_inputs(SplitMix64& rng, const AttentionCase& c, float q_scale) {
  const int64_t kv_size = c.ctx_len * c.num_kv_heads * c.head_dim;
  AttentionInputs in;
  in.q = random_floats(rng, c.num_heads * c.head_dim, -q_scale, q_scale);
  in.k = random_floats(rng, kv_size, -1.0f, 1.0f);
  in.v = random_floats(rng, kv_size, -3.0f, 3.0f);
  return in;
}

testing::Message describe(const AttentionCase& c, float q_scale) {
  return testing::Message() << "ctx=" << c.ctx_len << " heads=" << c.num_heads
                            << " kv_heads=" << c.num_kv_heads << " d=" << c.head_dim
                            << " q_scale=" << q_scale;
}

TEST(GqaAttentionTest, MatchesReference) {
  SplitMix64 rng(reference::test_seed("GqaAttentionTest.MatchesReference", 6001));
  const AttentionCase cases[] = {
      {1, 1, 1, 1},    {1, 4, 4, 8},      {2, 4, 2, 16},     {37, 8, 2, 64},  // groups 1, 2, 4
      {300, 6, 1, 128} /* MQA */, {129, 32, 8, 128}, {5, 3, 3, 7} /* odd head_dim */,
      {1000, 4, 1, 32},
  };
  for (const AttentionCase& c : cases) {
    for (float q_scale : {0.5f, 4.0f}) {  // soft and peaked softmax
      SCOPED_TRACE(describe(c, q_scale));
      const auto [q, k, v] = random_inputs(rng, c, q_scale);
      std::vector<float> out(q.size(), -99.0f), out_ref(q.size());
      gqa_attention(q.data(), k.data(), v.data(), c.ctx_len, c.num_heads, c.num_kv_heads,
                    c.head_dim, out.data());
      reference::gqa_attention(q.data(), k.data(), v.data(), c.ctx_len, c.num_heads,
                               c.num_kv_heads, c.head_dim, out_ref.data());
      float max_v = 0.0f;
      for (float value : v) max_v = std::max(max_v, std::fabs(value));
      for (std::size_t i = 0; i < out.size(); ++i) {
        ASSERT_LE(std::fabs(out[i] - out_ref[i]), 2e-5f * max_v + 1e-7f) << "element " << i;
      }
    }
  }
}

TEST(GqaAttentionTest, ContextOfOneReturnsTheValueRowExactly) {
  SplitMix64 rng(reference::test_seed("GqaAttentionTest.ContextOfOne", 6002));
  const int64_t heads = 8, kv_heads = 2, d = 16;
  const std::vector<float> q = random_floats(rng, heads * d, -10.0f, 10.0f);
  const std::vector<float> k = random_floats(rng, kv_heads * d, -10.0f, 10.0f);
  const std::vector<float> v = random_floats(rng, kv_heads * d, -1.0f, 1.0f);
  std::vector<float> out(heads * d);
  gqa_attention(q.data(), k.data(), v.data(), 1, heads, kv_heads, d, out.data());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < d; ++i) EXPECT_EQ(out[h * d + i], v[(h / 4) * d + i]) << h << "," << i;
  }
}

TEST(GqaAttentionTest, QueryHeadsReadTheirGroupsKvHead) {
  // Each KV head's V rows are the constant (kv_head + 1): every query head of group g must
  // output exactly g + 1, whatever the scores.
  SplitMix64 rng(reference::test_seed("GqaAttentionTest.GroupMapping", 6003));
  const int64_t ctx = 9, heads = 6, kv_heads = 3, d = 4;
  const std::vector<float> q = random_floats(rng, heads * d, -1.0f, 1.0f);
  const std::vector<float> k = random_floats(rng, ctx * kv_heads * d, -1.0f, 1.0f);
  std::vector<float> v(ctx * kv_heads * d);
  for (int64_t t = 0; t < ctx; ++t) {
    for (int64_t g = 0; g < kv_heads; ++g) {
      for (int64_t i = 0; i < d; ++i) v[(t * kv_heads + g) * d + i] = static_cast<float>(g + 1);
    }
  }
  std::vector<float> out(heads * d);
  gqa_attention(q.data(), k.data(), v.data(), ctx, heads, kv_heads, d, out.data());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < d; ++i) EXPECT_NEAR(out[h * d + i], static_cast<float>(h / 2 + 1), 1e-6f);
  }
}

TEST(GqaAttentionTest, LargeScoresDoNotOverflow) {
  // Scores around 1e4 would overflow exp without max subtraction.
  const int64_t ctx = 3, d = 2;
  const float q[2] = {100.0f, 100.0f};
  const float k[6] = {100.0f, 100.0f, 99.0f, 99.0f, -100.0f, -100.0f};
  const float v[6] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
  float out[2];
  gqa_attention(q, k, v, ctx, 1, 1, d, out);
  float out_ref[2];
  reference::gqa_attention(q, k, v, ctx, 1, 1, d, out_ref);
  EXPECT_TRUE(std::isfinite(out[0]) && std::isfinite(out[1]));
  EXPECT_NEAR(out[0], out_ref[0], 1e-5f);
  EXPECT_NEAR(out[1], out_ref[1], 1e-5f);
}

TEST(GqaAttentionTest, VectorPathsAreBitwiseTheScalarForm) {
  std::vector<VectorIsa> isas;
  for (const VectorIsa isa : {VectorIsa::kAvx512, VectorIsa::kAvx2}) {
    if (cpu_has_isa(isa)) isas.push_back(isa);
  }
  if (isas.empty()) GTEST_SKIP() << "neither AVX-512F nor AVX2+FMA: both are the scalar form";
  // gqa_attention's vector paths (16-float vectors with AVX-512F, pairs of 8-float halves with
  // AVX2) and gqa_attention_generic (the same operations one lane at a time) must give the
  // same bits: contexts around multiples of 16 (the vector paths' blocks), head_dim not a
  // multiple of 16 or 8, and past the vector paths' 512 (where both are the scalar form).
  SplitMix64 rng(reference::test_seed("GqaAttentionTest.VectorPathIsBitwise", 6004));
  const AttentionCase cases[] = {
      {1, 4, 1, 64},   {15, 4, 1, 64}, {16, 4, 1, 64},  {17, 8, 2, 64},
      {33, 4, 4, 7},   {47, 6, 3, 24}, {95, 16, 4, 64}, {300, 6, 1, 128},
      {513, 2, 1, 80}, {9, 2, 2, 520}, {20, 2, 1, 5},   {31, 2, 1, 12},
  };
  for (const AttentionCase& c : cases) {
    for (float q_scale : {0.5f, 8.0f}) {
      SCOPED_TRACE(describe(c, q_scale));
      const auto [q, k, v] = random_inputs(rng, c, q_scale);
      std::vector<float> scalar(q.size(), 99.0f);
      gqa_attention_generic(q.data(), k.data(), v.data(), c.ctx_len, c.num_heads, c.num_kv_heads,
                            c.head_dim, scalar.data());
      for (const VectorIsa isa : isas) {
        std::vector<float> fast(q.size(), -99.0f);
        gqa_attention(q.data(), k.data(), v.data(), c.ctx_len, c.num_heads, c.num_kv_heads,
                      c.head_dim, fast.data(), isa);
        for (std::size_t i = 0; i < fast.size(); ++i) {
          ASSERT_EQ(std::memcmp(&fast[i], &scalar[i], sizeof(float)), 0)
              << vector_isa_name(isa) << ", element " << i << ": " << fast[i] << " vs "
              << scalar[i];
        }
      }
    }
  }
}

}  // namespace
}  // namespace muflow::kernels::cpu
