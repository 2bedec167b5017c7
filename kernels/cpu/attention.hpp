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
/// softmax with max subtraction. Every sum has one fixed order, the same on every CPU and
/// for every batch (the result depends only on this token and its request's cache: batch
/// invariant), in 16 lanes:
/// - a score q·k: lane l sums the products of dimensions l, l+16, ... in ascending order, each
///   a fused multiply-add from +0; the 16 lanes are added as a halving tree (lane i + lane i+8,
///   then i + i+4, i + i+2, i + i+1);
/// - exp: `softmax_exp` below (Cody–Waite reduction and a degree-5 polynomial, ≤ 2 ulp);
/// - the softmax denominator: lane l sums positions l, l+16, ... ascending, then the same tree;
/// - out = Σ_t p_t · v_t, one fused multiply-add chain per element in position order from +0,
///   then times 1 / denominator.
/// Where the CPU has AVX-512F this runs in 16-float vectors (16 positions' scores at a time);
/// elsewhere the same operations one lane at a time (`gqa_attention_generic`), bitwise equal.
/// Any thread; no state but a thread-local score buffer. Sizes are trusted (MUFLOW_ASSERT).
void gqa_attention(const float* q, const float* k_cache, const float* v_cache, int64_t ctx_len,
                   int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float* out);

/// The scalar form of gqa_attention: the same operations in the same order one lane at a
/// time (std::fma for every fused multiply-add). What gqa_attention runs without AVX-512F;
/// tests compare the two bitwise.
void gqa_attention_generic(const float* q, const float* k_cache, const float* v_cache,
                           int64_t ctx_len, int64_t num_heads, int64_t num_kv_heads,
                           int64_t head_dim, float* out);

/// exp(x) for x ≤ 0 as the softmax computes it: 0 below -87; else x = n·ln 2 + r with
/// n = round-to-nearest-even(x·log2 e) (ln 2 split in two for the reduction, Cody–Waite),
/// exp(r) ≈ 1 + r + r²·P(r) with P the degree-5 minimax polynomial of Cephes' expf
/// (S. L. Moshier, Cephes Math Library, expf.c), times 2^n. Relative error ≤ 2 ulp on
/// [-87, 0]; exp(0) = 1 exactly. Each step a single IEEE operation (fused where written so),
/// so the vector lanes give the same bits.
float softmax_exp(float x);

}  // namespace muflow::kernels::cpu
