#pragma once
/// \file
/// Naive SwiGLU expert FFN: the oracle for kernels/cpu/expert_ffn.hpp.

#include <cstdint>

namespace muflow::kernels::reference {

/// silu(gate) ⊙ up on a fused [num_rows, 2·ffn] buffer (gate = first ffn columns), in double:
/// HF `act_fn(w1(x)) * w3(x)` with `act_fn = SiLU`. out: [num_rows, ffn] f32. Any thread.
void swiglu(const float* gate_up, int64_t num_rows, int64_t ffn, float* out);

/// Mirrors HF `MixtralBlockSparseTop2MLP.forward` (w1 = gate, w3 = up, w2 = down; also
/// `Qwen2MoeMLP`): y = down(silu(x·gateᵀ) ⊙ (x·upᵀ)), f32 weights; sums and silu in
/// double, the activation stored as f32 (as the cpu op stores it) before down. x, y: [num_rows, hidden] f32; gate, up: [ffn, hidden]; down: [hidden, ffn].
void expert_ffn(const float* x, const float* gate, const float* up, const float* down,
                int64_t num_rows, int64_t hidden, int64_t ffn, float* y);

/// As `expert_ffn` with bf16 weights (raw bits) under the cpu ExpertFfn's bf16 contract: x is
/// rounded to bf16 before gate/up, the activation is rounded to f32 then bf16 before down;
/// products and sums in double.
void expert_ffn_bf16(const float* x, const uint16_t* gate, const uint16_t* up,
                     const uint16_t* down, int64_t num_rows, int64_t hidden, int64_t ffn,
                     float* y);

}  // namespace muflow::kernels::reference
