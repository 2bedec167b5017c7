#include "kernels/reference/router.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace muflow::kernels::reference {

void router_topk(const float* logits, int64_t num_rows, int64_t num_experts, int64_t num_topk,
                 bool renormalize, int32_t* expert_ids, float* weights) {
  for (int64_t r = 0; r < num_rows; ++r) {
    const float* row = logits + r * num_experts;
    double max_logit = -INFINITY;
    for (int64_t e = 0; e < num_experts; ++e) max_logit = std::max(max_logit, double{row[e]});
    std::vector<double> probs(static_cast<std::size_t>(num_experts));
    double denominator = 0.0;
    for (int64_t e = 0; e < num_experts; ++e) {
      probs[e] = std::exp(static_cast<double>(row[e]) - max_logit);
      denominator += probs[e];
    }
    for (double& p : probs) p /= denominator;

    std::vector<int32_t> ids(static_cast<std::size_t>(num_experts));
    for (int64_t e = 0; e < num_experts; ++e) ids[e] = static_cast<int32_t>(e);
    std::stable_sort(ids.begin(), ids.end(),
                     [&](int32_t a, int32_t b) { return probs[a] > probs[b]; });
    double chosen_sum = 0.0;
    for (int64_t j = 0; j < num_topk; ++j) chosen_sum += probs[ids[j]];
    for (int64_t j = 0; j < num_topk; ++j) {
      expert_ids[r * num_topk + j] = ids[j];
      const double p = probs[ids[j]];
      weights[r * num_topk + j] = static_cast<float>(renormalize ? p / chosen_sum : p);
    }
  }
}

}  // namespace muflow::kernels::reference
