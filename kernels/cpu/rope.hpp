#pragma once
/// \file
/// Rotary position embedding, HF "rotate-half" convention (GPT-NeoX layout).

#include <cstdint>

namespace muflow::kernels::cpu {

/// In place on x: [num_rows, num_heads, head_dim] f32. For row r at position p = positions[r]
/// and i < head_dim/2: θ_i = p · theta^(-2i/head_dim) (angle computed in double, as HF
/// computes inv_freq·p in float32 — the error is below 1e-6 for positions < 65k),
/// (x_i, x_{i+d/2}) ← (x_i cos θ_i − x_{i+d/2} sin θ_i, x_{i+d/2} cos θ_i + x_i sin θ_i).
/// head_dim must be even. Any thread.
void rope_rotate_half(float* x, const int64_t* positions, int64_t num_rows, int64_t num_heads,
                      int64_t head_dim, float theta);

}  // namespace muflow::kernels::cpu
