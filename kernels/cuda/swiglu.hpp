#pragma once
/// \file
/// SwiGLU activation on the GPU (HF `act_fn(w1(x)) * w3(x)`, act_fn = SiLU).

#include <cuda_runtime_api.h>

#include <cstdint>

namespace muflow::kernels::cuda {

/// out[r, i] = silu(gate_up[r, i]) · gate_up[r, ffn + i] for a fused [rows, 2·ffn] buffer
/// (gate = first ffn columns), f32 device. `out_bf16` (may be null): the same values rounded
/// to bf16 bits (nearest-even), the input of a bf16 down projection; `out` (may be null) the
/// f32 values. Element-wise: batch invariant. Asynchronous on `stream`. Tolerance against
/// kernels/reference: 1e-6·|ref| (expf, not the cpu's polynomial).
void swiglu(const float* gate_up, int64_t rows, int64_t ffn, float* out, uint16_t* out_bf16,
            cudaStream_t stream);

}  // namespace muflow::kernels::cuda
