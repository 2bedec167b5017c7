#pragma once
/// \file
/// Naive MoE gate: the oracle for kernels/cpu/router.hpp.

#include <cstdint>

namespace muflow::kernels::reference {

/// Mirrors HF `MixtralSparseMoeBlock.forward` routing (and `Qwen2MoeSparseMoeBlock`):
/// `routing_weights = softmax(router_logits)`, `torch.topk(routing_weights, top_k)`, and
/// when `renormalize` `routing_weights /= routing_weights.sum(-1)`. Softmax in double; the
/// top-k is a full stable sort by probability (descending, ties → lower expert id), which is
/// what the cpu op promises (torch.topk leaves tie order unspecified).
/// logits: [num_rows, num_experts] f32; expert_ids: [num_rows, num_topk] int32 out;
/// weights: [num_rows, num_topk] f32 out. 1 ≤ num_topk ≤ num_experts. Any thread.
void router_topk(const float* logits, int64_t num_rows, int64_t num_experts, int64_t num_topk,
                 bool renormalize, int32_t* expert_ids, float* weights);

}  // namespace muflow::kernels::reference
