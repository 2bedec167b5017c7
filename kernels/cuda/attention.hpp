#pragma once
/// \file
/// Attention over a paged KV cache on the GPU, for prefill and decode rows alike (issue #20):
/// a row at position p attends to positions 0..p of its request, read through that request's
/// page table. Pages hold kKvPageTokens positions: [2][kKvPageTokens][kv_width] f32, K rows
/// then V rows, kv_width = num_kv_heads · head_dim, position t in page table[t / 16] at slot
/// t % 16. The pool and the page tables belong to the caller (engine/exec/cuda_kv_cache.hpp).
///
/// Sources: the paged cache follows vLLM's PagedAttention (Kwon et al., SOSP 2023: fixed-size
/// blocks of positions reached through a per-request block table); the one-pass softmax with
/// a running maximum is Milakov & Gimelshein, "Online normalizer calculation for softmax"
/// (2018), as FlashAttention uses it. The kernel itself is muflow's (one block per row and
/// head, no tiling over queries), written for a fixed reduction order, not for speed.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace muflow::kernels::cuda {

inline constexpr int64_t kKvPageTokens = 16;
inline constexpr int64_t kMaxAttentionHeadDim = 256;

/// Floats per page for rows of `kv_width` floats.
inline constexpr int64_t kv_page_floats(int64_t kv_width) { return 2 * kKvPageTokens * kv_width; }

/// Copies row r's K (src[r·row_stride + k_offset .. + kv_width)) and V (the kv_width floats
/// after it) into page page[r], slot slot[r] of `pool`. page, slot: [rows] int32 device.
void kv_write(float* pool, int64_t kv_width, const float* src, int64_t row_stride, int64_t k_offset,
              const int32_t* page, const int32_t* slot, int64_t rows, cudaStream_t stream);

/// out[r, h·d .. ] = softmax(q_{r,h}·Kᵀ / sqrt(head_dim))·V over the context_len[r] first
/// positions of row r's pages (page_table[table_start[r] ..]), query head h on KV head
/// h / (num_heads / num_kv_heads) (HF `repeat_kv`). q: the first num_heads·head_dim floats of
/// each `row_stride` row of `qkv`. One block per (row, head): scores in 1,024-position chunks
/// with a running max (online softmax), each score one fmaf chain over the head's dims, the
/// output one fmaf chain per dim in position order, reductions in a fixed tree: a row's bits
/// never depend on its batch. context_len[r] ≥ 1; head_dim ≤ 256. Asynchronous on `stream`.
/// Tolerance against kernels/reference: 2e-5·max|v| + 1e-7.
void paged_attention(const float* qkv, int64_t row_stride, const float* pool,
                     const int32_t* page_table, const int32_t* table_start,
                     const int32_t* context_len, int64_t rows, int64_t num_heads,
                     int64_t num_kv_heads, int64_t head_dim, float* out, cudaStream_t stream);

}  // namespace muflow::kernels::cuda
