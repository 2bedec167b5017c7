#pragma once
/// \file
/// Grouped-query causal attention of one query row against a request's KV cache.

#include <cstdint>
#include <optional>

#include "kernels/cpu/cpu_features.hpp"

namespace muflow::kernels::cpu {

/// One token's attention output (decode, or one prefill position).
///
/// q: [num_heads, head_dim] f32 (already RoPE-rotated).
/// k_cache, v_cache: [ctx_len, num_kv_heads, head_dim] f32 rows of the same request, positions
///   0..ctx_len-1 (the token's own K/V included as the last row: causal).
/// out: [num_heads, head_dim] f32.
/// Head h reads KV head h / (num_heads / num_kv_heads). Scores scaled by 1/sqrt(head_dim),
/// softmax with max subtraction. Every sum has one fixed order, the same on every CPU and
/// for every batch (the result depends only on this token and its request's cache: batch
/// invariant), in 16 lanes:
/// - a score q·k: lane l sums the products of dimensions l, l+16, ... in ascending order, each
///   a fused multiply-add from +0; the 16 lanes are added as a halving tree (lane i + lane i+8,
///   then i + i+4, i + i+2, i + i+1);
/// - exp: `fast_exp` (kernels/cpu/fast_exp.hpp, ≤ 2 ulp), not libm's;
/// - the softmax denominator: lane l sums positions l, l+16, ... ascending, then the same tree;
/// - out = Σ_t p_t · v_t, one fused multiply-add chain per element in position order from +0,
///   then times 1 / denominator.
/// Where the CPU has AVX-512F this runs in 16-float vectors (16 positions' scores at a time),
/// with AVX2 and FMA in pairs of 8-float halves (lanes 0-7 and 8-15 of each sum), elsewhere
/// the same operations one lane at a time (`gqa_attention_generic`), bitwise equal for finite
/// inputs (a NaN or ±inf in q/K/V gives NaN outputs in both, possibly of another sign or
/// payload). `isa`: the vector path to run (nullopt: the widest the CPU has; one it lacks
/// aborts); head_dim > 512 always runs the scalar form.
/// Any thread; no state but a thread-local score buffer. Sizes are trusted (MUFLOW_ASSERT).
void gqa_attention(const float* q, const float* k_cache, const float* v_cache, int64_t ctx_len,
                   int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float* out,
                   std::optional<VectorIsa> isa = std::nullopt);

/// The scalar form of gqa_attention: the same operations in the same order one lane at a
/// time (std::fma for every fused multiply-add). What gqa_attention runs without a vector ISA;
/// tests compare the two bitwise.
void gqa_attention_generic(const float* q, const float* k_cache, const float* v_cache,
                           int64_t ctx_len, int64_t num_heads, int64_t num_kv_heads,
                           int64_t head_dim, float* out);

}  // namespace muflow::kernels::cpu
