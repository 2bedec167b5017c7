#pragma once
/// \file
/// The GPU's small row-wise ops between the GEMMs: embedding gather, residual add, rounding
/// to bf16 and the shared expert's gate. Element- or row-wise with a fixed order per row:
/// batch invariant. All pointers are device pointers; asynchronous on `stream`.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace muflow::kernels::cuda {

/// h[i, :] = table[ids[i], :]. table: [vocab, dim] f32; ids: [rows] int32, each in
/// [0, vocab) (checked by the caller); h: [rows, dim] f32.
void embed_gather(const float* table, const int32_t* ids, int64_t rows, int64_t dim, float* h,
                  cudaStream_t stream);

/// y[i] += x[i] for i < count (f32).
void add_inplace(float* y, const float* x, int64_t count, cudaStream_t stream);

/// out[i] = bf16 bits of x[i], nearest-even (kernels/cpu/bf16.hpp's f32_to_bf16, bit for bit).
void round_to_bf16(const float* x, int64_t count, uint16_t* out, cudaStream_t stream);

/// The shared expert's gate (HF `Qwen2MoeSparseMoeBlock`): shared[r, :] *= sigmoid(x[r, :] ·
/// gate), the dot product summed in index order. x, shared: [rows, dim]; gate: [dim].
void shared_expert_gate(const float* x, const float* gate, int64_t rows, int64_t dim, float* shared,
                        cudaStream_t stream);

}  // namespace muflow::kernels::cuda
