#include "kernels/assert.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/router.hpp"

namespace muflow::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxExperts = static_cast<int>(kMaxRouterExperts);

__device__ __forceinline__ float prob_of(float logit, float max_logit, float denominator) {
  if (isnan(logit)) return 0.f;
  const float p = expf(logit - max_logit) / denominator;
  return isnan(p) ? 0.f : p;
}

__global__ void __launch_bounds__(kThreads)
    router_kernel(const float* logits, int64_t rows, int64_t num_experts, int64_t num_topk,
                  bool renormalize, int32_t* expert_ids, float* weights) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (r >= rows) return;
  const float* row = logits + r * num_experts;
  float max_logit = -INFINITY;
  for (int64_t e = 0; e < num_experts; ++e) {
    if (!isnan(row[e])) max_logit = fmaxf(max_logit, row[e]);
  }
  double denominator = 0.0;
  for (int64_t e = 0; e < num_experts; ++e) {
    denominator += isnan(row[e]) ? 0.0 : static_cast<double>(expf(row[e] - max_logit));
  }
  const float den = static_cast<float>(denominator);
  uint32_t taken[kMaxExperts / 32] = {};
  int32_t* ids = expert_ids + r * num_topk;
  float* w = weights + r * num_topk;
  double chosen_sum = 0.0;
  for (int64_t j = 0; j < num_topk; ++j) {
    int32_t best = -1;
    float best_p = 0.f;
    for (int64_t e = 0; e < num_experts; ++e) {
      if (taken[e / 32] & (1u << (e % 32))) continue;
      const float p = prob_of(row[e], max_logit, den);
      if (best < 0 || p > best_p) {  // ascending ids: a tie keeps the lower id
        best = static_cast<int32_t>(e);
        best_p = p;
      }
    }
    taken[best / 32] |= 1u << (best % 32);
    ids[j] = best;
    w[j] = best_p;
    chosen_sum += best_p;
  }
  if (renormalize) {
    const float sum = static_cast<float>(chosen_sum);
    for (int64_t j = 0; j < num_topk; ++j) w[j] /= sum;
  }
}

}  // namespace

void router_topk(const float* logits, int64_t rows, int64_t num_experts, int64_t num_topk,
                 bool renormalize, int32_t* expert_ids, float* weights, cudaStream_t stream) {
  MUFLOW_ASSERT(rows >= 0 && num_experts > 0 && num_experts <= kMaxExperts,
                "cuda router_topk: num_experts must be in [1, 1024]");
  MUFLOW_ASSERT(num_topk >= 1 && num_topk <= num_experts,
                "cuda router_topk: num_topk must be in [1, num_experts]");
  if (rows == 0) return;
  const auto blocks = static_cast<unsigned>((rows + kThreads - 1) / kThreads);
  router_kernel<<<blocks, kThreads, 0, stream>>>(logits, rows, num_experts, num_topk, renormalize,
                                                 expert_ids, weights);
  MUFLOW_CUDA_LAUNCH_CHECK();
}

}  // namespace muflow::kernels::cuda
