#pragma once
/// \file
/// muflow's GEMMs on NVIDIA GPUs: C = A·Wᵀ (+ bias) with W in HF layout [N, K], one fixed
/// reduction order per output element whatever M, the row's position in the batch or the
/// tile shape chosen for M (kernels/README.md "The batch-invariance rule"; issue #20):
///
/// - f32 (`gemm_f32`): CUDA cores, every element one `fmaf` chain over k ascending from +0,
///   bias added last: the same operations, in the same order, as the cpu fixed-order GEMM
///   (kernels/cpu/fixed_order_gemm.hpp), so the same bits.
/// - bf16 (`gemm_bf16`): tensor cores (bf16 in, f32 accumulate); every element is one MMA per
///   16-wide chunk of k, ascending, for the chunks that start below K; no split-K. The kernel
///   is picked from M — up to 8 or 16 rows, warps streaming W through `cp.async` rings into
///   m16n8k16 `mma.sync` (decode); up to 64, WMMA tiles; more, warpgroup MMAs on sm_90
///   (gemm_sm90.hpp) or 128-row WMMA tiles — but only changes which warp computes a row, never
///   the chunk sequence an element goes through (gemm.cu; the instructions' bits agree, see
///   kernels/cuda/README.md).
/// - grouped (`grouped_gemm_*`): many A blocks against their own W of one shape [N, K], in
///   one launch (the experts of one MoE block), each element computed as by the dense form.
///
/// Source: muflow's own kernels. The bf16 paths use CUDA's WMMA API (CUDA C++ Programming
/// Guide, "Warp Matrix Functions"), PTX `mma.sync`, `ldmatrix` and `wgmma` (PTX ISA), and
/// multistage `cp.async` shared-memory pipelines in the manner of CUTLASS's Ampere GEMMs (the
/// stage counts and tile shapes are ours, gemm.cu, gemm_sm90.cu); none has split-K, which is
/// what keeps the per-element order fixed.
///
/// All pointers are device pointers; sizes are elements; every call is asynchronous on
/// `stream`. Preconditions (aborting through MUFLOW_ASSERT): m, n, k ≥ 0; lda, ldw ≥ k;
/// ldc ≥ n; bf16 forms: k, lda and ldw multiples of 8 and A and W 16-byte aligned (cp.async).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace muflow::kernels::cuda {

/// Shared memory per block the portable GEMM kernels ask for (the largest configuration of the
/// bf16 tiles and of the narrow f32 kernel's ring), bytes: a GPU must allow it
/// (cudaDevAttrMaxSharedMemoryPerBlockOptin; H100, H200 and A100 do, sm_86 and sm_89 parts do
/// not). The sm_90 kernel's 197,696 bytes fit every sm_90 part.
std::size_t gemm_shared_bytes();

/// c[m, n] = Σ_k a[m, k]·w[n, k] (+ bias[n]); f32. bias may be null.
void gemm_f32(const float* a, int64_t lda, const float* w, int64_t ldw, const float* bias, float* c,
              int64_t ldc, int64_t m, int64_t n, int64_t k, cudaStream_t stream);

/// As gemm_f32 with bf16 A and W (raw bits), f32 accumulate and output. Round A to bf16
/// first (`round_to_bf16`), as the cpu Linear's bf16 contract does.
void gemm_bf16(const uint16_t* a, int64_t lda, const uint16_t* w, int64_t ldw, const float* bias,
               float* c, int64_t ldc, int64_t m, int64_t n, int64_t k, cudaStream_t stream);

/// One group of a grouped GEMM: rows [0, m) of `a` (ld = k) against `w` [n, k], into `c`
/// (ld = n). `a` is uint16_t bf16 bits or float, as the call's dtype.
struct GemmGroup {
  const void* a = nullptr;
  const void* w = nullptr;
  float* c = nullptr;
  int64_t m = 0;
};

/// The launch plan of a grouped GEMM, built on the host: the groups and, per group, the
/// index of its first row tile. Upload `groups` and `tile_start` to the device (`bytes()`
/// bytes, `pack` writes them into one host buffer) and pass that copy to `grouped_gemm_*`.
struct GroupedGemmPlan {
  bool bf16 = false;        ///< made for grouped_gemm_bf16 (else grouped_gemm_f32)
  int32_t tile_rows = 0;    ///< rows per tile (the launch's BM)
  int32_t total_tiles = 0;  ///< Σ ceil(m_g / tile_rows)
  std::vector<GemmGroup> groups;
  std::vector<int32_t> tile_start;  ///< [groups + 1]
  /// Plans `groups` (any number, each m ≥ 0 rows) for a bf16 (`bf16` true) or f32 launch: the
  /// tile height from the mean rows of the non-empty groups (any height gives the same bits),
  /// each group's first tile. Host only, any thread. Aborts (MUFLOW_ASSERT) on a negative m or
  /// more than 65,535 row tiles in all (one launch's grid).
  static GroupedGemmPlan make(std::vector<GemmGroup> groups, bool bf16);
  /// Bytes of the packed form: the groups, then tile_start (8-byte aligned).
  std::size_t bytes() const;
  /// Writes the packed form into `out` (bytes() bytes).
  void pack(void* out) const;
};

/// Runs every group of `plan` in one launch; `packed` is the device copy of plan.pack().
/// bf16: the groups' a and w are bf16 bits (k multiple of 8, 16-byte aligned rows).
void grouped_gemm_bf16(const GroupedGemmPlan& plan, const void* packed, int64_t n, int64_t k,
                       cudaStream_t stream);
void grouped_gemm_f32(const GroupedGemmPlan& plan, const void* packed, int64_t n, int64_t k,
                      cudaStream_t stream);

}  // namespace muflow::kernels::cuda
