#include "kernels/cpu/router.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/assert.hpp"

namespace muflow::kernels::cpu {

void router_topk(const float* logits, int64_t num_rows, int64_t num_experts, int64_t num_topk,
                 bool renormalize, int32_t* expert_ids, float* weights) {
  MUFLOW_ASSERT(num_rows >= 0 && num_experts > 0, "router_topk: bad sizes");
  MUFLOW_ASSERT(num_topk >= 1 && num_topk <= num_experts,
                "router_topk: num_topk must be in [1, num_experts]");
  thread_local std::vector<float> probs;
  thread_local std::vector<int32_t> order;
  probs.resize(static_cast<std::size_t>(num_experts));
  order.resize(static_cast<std::size_t>(num_experts));

  for (int64_t r = 0; r < num_rows; ++r) {
    const float* row = logits + r * num_experts;
    // Softmax in f32 (HF: F.softmax(router_logits, dim=1, dtype=torch.float)), max-subtracted,
    // the denominator summed in expert order in double.
    // A NaN logit counts as -inf (probability 0): bad input must not poison the row or
    // break the sort's strict weak ordering.
    float max_logit = -INFINITY;
    for (int64_t e = 0; e < num_experts; ++e) {
      if (!std::isnan(row[e])) max_logit = std::max(max_logit, row[e]);
    }
    double denominator = 0.0;
    for (int64_t e = 0; e < num_experts; ++e) {
      probs[e] = std::isnan(row[e]) ? 0.0f : std::exp(row[e] - max_logit);
      denominator += probs[e];
    }
    const float denominator_f32 = static_cast<float>(denominator);
    for (int64_t e = 0; e < num_experts; ++e) {
      probs[e] /= denominator_f32;
      if (std::isnan(probs[e])) probs[e] = 0.0f;  // all -inf / +inf rows: still ordered
    }
    // Top-k by probability, descending; ties go to the lower expert id.
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + num_topk, order.end(),
                      [](int32_t a, int32_t b) {
                        return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
                      });
    int32_t* row_ids = expert_ids + r * num_topk;
    float* row_weights = weights + r * num_topk;
    double chosen_sum = 0.0;
    for (int64_t j = 0; j < num_topk; ++j) {
      row_ids[j] = order[j];
      row_weights[j] = probs[order[j]];
      chosen_sum += row_weights[j];
    }
    // HF Mixtral: routing_weights /= routing_weights.sum(dim=-1, keepdim=True).
    if (renormalize) {
      const float sum = static_cast<float>(chosen_sum);
      for (int64_t j = 0; j < num_topk; ++j) row_weights[j] /= sum;
    }
  }
}

}  // namespace muflow::kernels::cpu
