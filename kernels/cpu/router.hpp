#pragma once
/// \file
/// MoE gate: softmax over router logits, top-k, optional renormalisation.

#include <cstdint>

namespace muflow::kernels::cpu {

/// logits: [num_rows, num_experts] f32 (x · W_gateᵀ).
/// expert_ids: [num_rows, num_topk] int32 out, descending probability, ties → lower id.
/// weights: [num_rows, num_topk] f32 out: softmax probabilities of the chosen experts, divided
///   by their sum when `renormalize` (Mixtral always; Qwen2-MoE when norm_topk_prob).
/// Per-row, fixed order (batch invariant). Any thread.
/// A NaN logit counts as −inf (probability 0). Requires 1 ≤ num_topk ≤ num_experts (assert).
void router_topk(const float* logits, int64_t num_rows, int64_t num_experts, int64_t num_topk,
                 bool renormalize, int32_t* expert_ids, float* weights);

}  // namespace muflow::kernels::cpu
