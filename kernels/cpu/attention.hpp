#pragma once
/// \file
/// Grouped-query causal attention of one query row against a request's KV cache.

#include <cstdint>

namespace muflow::kernels::cpu {

/// One token's attention output (decode, or one prefill position).
///
/// q: [num_heads, head_dim] f32 (already RoPE-rotated).
/// k_cache, v_cache: [ctx_len, num_kv_heads, head_dim] f32 rows of the same request, positions
///   0..ctx_len-1 (the token's own K/V included as the last row: causal).
/// out: [num_heads, head_dim] f32.
/// Head h reads KV head h / (num_heads / num_kv_heads). Scores scaled by 1/sqrt(head_dim),
/// softmax with max subtraction, all sums in position order: the result depends only on
/// this token and its request's cache (batch invariant). Any thread.
void gqa_attention(const float* q, const float* k_cache, const float* v_cache, int64_t ctx_len,
                   int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float* out);

}  // namespace muflow::kernels::cpu
