#pragma once
/// \file
/// Rotary position embedding on the GPU (HF `apply_rotary_pos_emb` with `rotate_half`,
/// GPT-NeoX layout), on the q and k parts of fused q|k|v rows.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace muflow::kernels::cuda {

/// Rotates, in place, the first `num_heads` heads (q) and the `num_kv_heads` heads that follow
/// them (k) of each row of `qkv` ([rows, row_stride] f32 device); v is untouched. Pair i of a
/// head at position p turns by p · theta^(−2i/head_dim), computed in double; the rotation
/// in f32 from the angle's f32 cosine and sine (the cpu op's arithmetic). positions: [rows]
/// int64 device. head_dim even. Asynchronous on `stream`. Tolerance against
/// kernels/reference: 2e-6·(|x_i| + |x_{i+d/2}|).
void rope_qk(float* qkv, int64_t row_stride, const int64_t* positions, int64_t rows,
             int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float theta,
             cudaStream_t stream);

}  // namespace muflow::kernels::cuda
