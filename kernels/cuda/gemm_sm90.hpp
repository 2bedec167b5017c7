#pragma once
/// \file
/// The Hopper (sm_90) form of muflow's bf16 GEMM for batches of more than 64 rows: warpgroup
/// MMAs (PTX `wgmma.mma_async` m64n256k16, bf16 in, f32 accumulate) on 128×256 tiles. A
/// persistent launch (one 384-thread block per SM, at most one per tile) whose blocks walk the
/// tiles in bands of 16 row tiles; in each block one producer warpgroup fills a four-stage
/// shared-memory ring with `cp.async` while two consumer warpgroups multiply, each stage
/// handed over by mbarriers (full: the producer's copies landed; empty: the MMAs that read it
/// completed), so loads, MMAs and the previous tile's stores overlap without block barriers.
/// Internal to kernels/cuda: gemm.cu calls it in place of its 128-row WMMA tile kernel where
/// `available()`, so callers see `gemm_bf16` and `grouped_gemm_bf16` only (gemm.hpp).
///
/// Bits: an element of C is acc = +0, then one m16n8k16-equivalent product of a 16-wide chunk
/// of k per chunk, ascending, for the chunks that start below K: the sequence of gemm.cu's
/// kernels. On an H200, wgmma m64n8k16 (no swizzle) and mma.sync m16n8k16 give the same bits
/// for the same chunk chain (bench/wgmma_bits.cu: 2,048 of 2,048 elements over K = 4,096 with
/// exponents spanning 2^±10; bench/README.md "CUDA backend"); that this kernel's m64n256k16
/// on swizzled tiles does too is what CudaGemm.Bf16RowsAreBatchInvariant and
/// CudaGemm.GroupedBf16EqualsDenseBitwise check on the GPU (rows of 100 and 512-row batches,
/// groups of 70–200 rows, against the other kernels' rows).
///
/// Source: the PTX ISA's warpgroup-level MMA chapter (instruction, matrix descriptors, the
/// 128-byte-swizzled K-major shared-memory layout, the fence/commit/wait protocol), its
/// mbarrier, `cp.async.mbarrier.arrive.noinc` and `setmaxnreg` sections; warp-specialized
/// producer/consumer warpgroups on a persistent grid are the scheme CUTLASS 3's sm90
/// "warp-specialized cooperative" kernels use (there with TMA). The tile shape, band order
/// and pipeline are ours. No TMA, no clusters, no split-K. Shared memory per block: 197,696
/// bytes (sm_90 allows 232,448).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/gemm.hpp"

namespace muflow::kernels::cuda::sm90 {

/// Rows per tile (and per grouped tile): the same as gemm.cu's largest WMMA tile.
inline constexpr int kTileRows = 128;

/// True where the current device is sm_90 (H100, H200) and this build holds sm_90a code for the
/// kernel (CMAKE_CUDA_ARCHITECTURES lists 90a). Host, any thread; the answer is kept per device
/// after the first call.
bool available();

/// As kernels::cuda::gemm_bf16, any m: C[m, n] (f32, ld ldc) = A[m, k] · W[n, k]ᵀ (bf16 bits,
/// row-major, ld lda / ldw) + bias[n] (f32, or null), each element one fixed-order chain over
/// k (kernels/cuda/README.md). Aborts (MUFLOW_ASSERT) unless available(), k, lda and ldw are
/// multiples of 8, A and W are 16-byte aligned and ⌈m / 128⌉ · ⌈n / 256⌉ ≤ 2^30. Asynchronous on
/// `stream`; host, any thread.
void gemm_bf16(const uint16_t* a, int64_t lda, const uint16_t* w, int64_t ldw, const float* bias,
               float* c, int64_t ldc, int64_t m, int64_t n, int64_t k, cudaStream_t stream);

/// One launch over a grouped plan made with tile_rows == kTileRows: `groups` and `tile_start`
/// are the device copies of GroupedGemmPlan::pack's two parts (each group: its rows of A, its
/// expert's W[n, k] and C, bf16 in and f32 out as gemm_bf16). Aborts unless available(), k is
/// a multiple of 8 and total_tiles · ⌈n / 256⌉ ≤ 2^30; the plan's tile_rows is the caller's to
/// match (kernels::cuda::grouped_gemm_bf16 does). Asynchronous on `stream`; host, any thread.
void grouped_gemm_bf16(const GemmGroup* groups, const int32_t* tile_start, int num_groups,
                       int total_tiles, int64_t n, int64_t k, cudaStream_t stream);

}  // namespace muflow::kernels::cuda::sm90
