#include "kernels/reference/attention.hpp"

#include <cmath>
#include <vector>

namespace muflow::kernels::reference {

void gqa_attention(const float* q, const float* k_cache, const float* v_cache, int64_t ctx_len,
                   int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float* out) {
  const int64_t group = num_heads / num_kv_heads;
  std::vector<double> scores(static_cast<std::size_t>(ctx_len));
  for (int64_t h = 0; h < num_heads; ++h) {
    const int64_t kv_head = h / group;
    double max_score = -INFINITY;
    for (int64_t t = 0; t < ctx_len; ++t) {
      double dot = 0.0;
      for (int64_t d = 0; d < head_dim; ++d) {
        dot += static_cast<double>(q[h * head_dim + d]) *
               static_cast<double>(k_cache[(t * num_kv_heads + kv_head) * head_dim + d]);
      }
      scores[t] = dot / std::sqrt(static_cast<double>(head_dim));
      if (scores[t] > max_score) max_score = scores[t];
    }
    double denominator = 0.0;
    for (int64_t t = 0; t < ctx_len; ++t) {
      scores[t] = std::exp(scores[t] - max_score);
      denominator += scores[t];
    }
    for (int64_t d = 0; d < head_dim; ++d) {
      double sum = 0.0;
      for (int64_t t = 0; t < ctx_len; ++t) {
        sum += scores[t] * static_cast<double>(v_cache[(t * num_kv_heads + kv_head) * head_dim + d]);
      }
      out[h * head_dim + d] = static_cast<float>(sum / denominator);
    }
  }
}

}  // namespace muflow::kernels::reference
