#pragma once
/// \file
/// The MoE gate on the GPU (HF `MixtralSparseMoeBlock` routing): softmax over the experts,
/// top-k by probability, optional renormalization of the chosen k.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace muflow::kernels::cuda {

/// The most experts router_topk takes (its per-row bitmask).
inline constexpr int64_t kMaxRouterExperts = 1024;

/// logits: [rows, num_experts] f32 device; expert_ids: [rows, num_topk] int32 device out,
/// descending probability, ties to the lower expert id (the cpu op's order); weights:
/// [rows, num_topk] f32 device out. Softmax in f32 with the denominator summed in expert
/// order in double (as the cpu op); a NaN logit counts as probability 0. One thread per row:
/// batch invariant. 1 ≤ num_topk ≤ num_experts ≤ 1024. Asynchronous on `stream`.
/// Tolerance against kernels/reference: ids equal, weights 2e-6·w.
void router_topk(const float* logits, int64_t rows, int64_t num_experts, int64_t num_topk,
                 bool renormalize, int32_t* expert_ids, float* weights, cudaStream_t stream);

}  // namespace muflow::kernels::cuda
