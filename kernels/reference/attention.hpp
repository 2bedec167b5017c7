#pragma once
/// \file
/// Naive grouped-query attention: the oracle for kernels/cpu/attention.hpp.

#include <cstdint>

namespace muflow::kernels::reference {

/// Mirrors HF `eager_attention_forward` for one query row (Mixtral / Qwen2-MoE with
/// `repeat_kv`: query head h uses KV head h / (num_heads / num_kv_heads)), causal by
/// construction (the cache holds only positions ≤ the query's): softmax(q·Kᵀ / sqrt(d)) · V.
/// All arithmetic in double. q, out: [num_heads, head_dim] f32; k_cache, v_cache:
/// [ctx_len, num_kv_heads, head_dim] f32; ctx_len ≥ 1. Any thread.
void gqa_attention(const float* q, const float* k_cache, const float* v_cache, int64_t ctx_len,
                   int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float* out);

}  // namespace muflow::kernels::reference
