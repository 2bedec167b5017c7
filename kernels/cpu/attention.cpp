#include "kernels/cpu/attention.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/assert.hpp"

namespace muflow::kernels::cpu {
namespace {

/// Positions whose scores are computed together (independent dot products).
constexpr int64_t kScorePositions = 8;

}  // namespace

void gqa_attention(const float* q, const float* k_cache, const float* v_cache, int64_t ctx_len,
                   int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float* out) {
  MUFLOW_ASSERT(ctx_len > 0, "gqa_attention: ctx_len must be >= 1 (the token's own K/V)");
  MUFLOW_ASSERT(num_heads > 0 && num_kv_heads > 0 && head_dim > 0, "gqa_attention: bad sizes");
  MUFLOW_ASSERT(num_heads % num_kv_heads == 0,
                "gqa_attention: num_heads must be a multiple of num_kv_heads");
  const int64_t group = num_heads / num_kv_heads;
  const int64_t kv_stride = num_kv_heads * head_dim;  // floats between two positions
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  thread_local std::vector<float> scores;
  scores.resize(static_cast<std::size_t>(ctx_len));

  for (int64_t h = 0; h < num_heads; ++h) {
    const float* q_head = q + h * head_dim;
    const int64_t kv_head = h / group;
    const float* k_head = k_cache + kv_head * head_dim;
    const float* v_head = v_cache + kv_head * head_dim;
    float* out_head = out + h * head_dim;

    // Scores q·k / sqrt(d), each dot product summed in dimension order. kScorePositions
    // positions at a time: their sums are independent chains the CPU overlaps (one chain is
    // bound by the add latency), each still in dimension order, so the bits are those of
    // one position at a time.
    float max_score = -INFINITY;
    int64_t t = 0;
    for (; t + kScorePositions <= ctx_len; t += kScorePositions) {
      float dot[kScorePositions] = {};
      const float* k_rows = k_head + t * kv_stride;
      for (int64_t d = 0; d < head_dim; ++d) {
        const float qd = q_head[d];
        for (int64_t j = 0; j < kScorePositions; ++j) dot[j] += qd * k_rows[j * kv_stride + d];
      }
      for (int64_t j = 0; j < kScorePositions; ++j) {
        scores[t + j] = dot[j] * scale;
        max_score = std::max(max_score, scores[t + j]);
      }
    }
    for (; t < ctx_len; ++t) {
      const float* k_row = k_head + t * kv_stride;
      float dot = 0.0f;
      for (int64_t d = 0; d < head_dim; ++d) dot += q_head[d] * k_row[d];
      scores[t] = dot * scale;
      max_score = std::max(max_score, scores[t]);
    }
    // Softmax numerators and their sum, in position order.
    float denominator = 0.0f;
    for (t = 0; t < ctx_len; ++t) {
      scores[t] = std::exp(scores[t] - max_score);
      denominator += scores[t];
    }
    // out = Σ_t p_t v_t / Σ_t p_t, accumulated in position order for every dimension.
    std::fill(out_head, out_head + head_dim, 0.0f);
    for (t = 0; t < ctx_len; ++t) {
      const float p = scores[t];
      const float* v_row = v_head + t * kv_stride;
      for (int64_t d = 0; d < head_dim; ++d) out_head[d] += p * v_row[d];
    }
    const float inv_denominator = 1.0f / denominator;
    for (int64_t d = 0; d < head_dim; ++d) out_head[d] *= inv_denominator;
  }
}

}  // namespace muflow::kernels::cpu
