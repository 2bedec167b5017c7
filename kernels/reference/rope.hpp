#pragma once
/// \file
/// Naive rotary embedding: the oracle for kernels/cpu/rope.hpp.

#include <cstdint>

namespace muflow::kernels::reference {

/// Mirrors HF `apply_rotary_pos_emb` with `rotate_half` (Llama / Mixtral / Qwen2-MoE,
/// GPT-NeoX layout): q·cos + rotate_half(q)·sin, where rotate_half(q) = (−q[d/2:], q[:d/2])
/// and the angle of pair i at position p is p · theta^(−2i/d). Everything in double.
/// x: [num_rows, num_heads, head_dim] f32, rotated in place; positions: [num_rows].
/// head_dim must be even. Any thread.
void rope_rotate_half(float* x, const int64_t* positions, int64_t num_rows, int64_t num_heads,
                      int64_t head_dim, float theta);

}  // namespace muflow::kernels::reference
