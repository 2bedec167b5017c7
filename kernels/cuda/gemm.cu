#include <cuda_bf16.h>
#include <mma.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/assert.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/fma_chain.cuh"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/gemm_common.cuh"
#include "kernels/cuda/gemm_sm90.hpp"

namespace muflow::kernels::cuda {
namespace {

// ---- f32: CUDA cores, one fmaf chain per element -------------------------------------------

constexpr int kF32Tile = 64;  // BM = BN
constexpr int kF32K = 64;     // k per shared-memory stage
constexpr int kF32Threads = 256;

// One 64×64 tile of C at (m0, n0). Thread (ty, tx) owns rows ty + 16·i and columns tx + 16·j,
// i, j < 4; each of its elements is acc = fmaf(a[k], w[k], acc) for k = 0, 1, ..., K−1 from
// +0 (the last stage runs only its kend valid k: no padded terms enter the chain).
__device__ __forceinline__ void f32_tile(const float* __restrict__ a, int64_t lda,
                                         const float* __restrict__ w, int64_t ldw,
                                         const float* __restrict__ bias, float* __restrict__ c,
                                         int64_t ldc, int64_t m, int64_t n, int64_t k, int64_t m0,
                                         int64_t n0) {
  __shared__ float as[kF32K][kF32Tile + 1];
  __shared__ float ws[kF32K][kF32Tile + 1];
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % 16, ty = tid / 16;
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
  }
  for (int64_t k0 = 0; k0 < k; k0 += kF32K) {
    const int kend = static_cast<int>(k - k0 < kF32K ? k - k0 : kF32K);
    // All loads first (independent, so they overlap), then the shared stores.
    constexpr int kLoads = kF32Tile * kF32K / kF32Threads;
    float ra[kLoads], rw[kLoads];
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int e = tid + i * kF32Threads, row = e / kF32K, kk = e % kF32K;
      const int64_t gk = k0 + kk;
      ra[i] = (m0 + row < m && gk < k) ? a[(m0 + row) * lda + gk] : 0.f;
      rw[i] = (n0 + row < n && gk < k) ? w[(n0 + row) * ldw + gk] : 0.f;
    }
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int e = tid + i * kF32Threads;
      as[e % kF32K][e / kF32K] = ra[i];
      ws[e % kF32K][e / kF32K] = rw[i];
    }
    __syncthreads();
    for (int kk = 0; kk < kend; ++kk) {
      float av[4], wv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = as[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) wv[j] = ws[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], wv[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t gm = m0 + ty + 16 * i, gn = n0 + tx + 16 * j;
      if (gm < m && gn < n) c[gm * ldc + gn] = bias != nullptr ? acc[i][j] + bias[gn] : acc[i][j];
    }
  }
}

// Narrow weights (N ≤ 16, e.g. a router's experts): the tile kernel would run one block over
// all of K, a load-latency-bound loop. Here a block owns 8 rows × all N columns and walks K in
// chunks of 128·V through a ring of stages filled by cp.async (thread t copies k V·t ..
// V·t + V − 1 of every row: coalesced, no division; V = 4 where rows are 16-byte aligned), so
// several chunks' loads are in flight while thread (r, j) runs its fmaf chain for element
// (r, j) over the current chunk, reading its operands four k at a time. Rows past M or N are
// never copied, and their threads run no chain and store nothing (they only keep to the
// barriers); k past K is zero-filled but never enters a chain. The chain is over k ascending from
// +0, so the bits are the tile kernel's; at one row its K dependent fmaf are the kernel's floor (~4
// cycles each).
constexpr int kNarrowN = 16, kNarrowRows = 8;
constexpr int kNarrowThreads = kNarrowN * kNarrowRows;

template <int V>
struct NarrowConfig {
  static constexpr int kK = 128 * V;  // k per chunk: V per thread
  static constexpr int kLd = kK + 4;  // 16-byte rows; float4 reads: no conflict
  static constexpr int kStages = V == 4 ? 3 : 6;
  static constexpr int kStageFloats = (kNarrowRows + kNarrowN) * kLd;
  static constexpr int kSmemBytes = kStages * kStageFloats * 4;
};

// 4·V bytes global → shared, `src_bytes` (0 .. 4·V) read, zeros for the rest.
template <int V>
__device__ __forceinline__ void cp_async_zfill(void* smem_dst, const void* gmem_src,
                                               int src_bytes) {
  if constexpr (V == 4) {
    cp_async16_zfill(smem_dst, gmem_src, src_bytes);
  } else {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem_src),
                 "r"(src_bytes));
  }
}

template <int V>
__global__ void __launch_bounds__(kNarrowThreads)
    gemm_f32_narrow_kernel(const float* __restrict__ a, int64_t lda, const float* __restrict__ w,
                           int64_t ldw, const float* __restrict__ bias, float* __restrict__ c,
                           int64_t ldc, int64_t m, int64_t n, int64_t k) {
  using C = NarrowConfig<V>;
  extern __shared__ __align__(16) float narrow_smem[];
  const int tid = static_cast<int>(threadIdx.x);
  const int r = tid / kNarrowN, j = tid % kNarrowN;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kNarrowRows;
  const int num_chunks = static_cast<int>((k + C::kK - 1) / C::kK);
  // Stage: A's 8 rows, then W's 16, kLd floats each.
  auto load = [&](int chunk) {
    float* stage = narrow_smem + (chunk % C::kStages) * C::kStageFloats;
    const int64_t kk = static_cast<int64_t>(chunk) * C::kK + V * tid;
    const int64_t left = k - kk;  // floats of this thread's piece inside the matrix
    const int bytes = left >= V ? 4 * V : left > 0 ? static_cast<int>(4 * left) : 0;
    const int64_t kin = bytes > 0 ? kk : 0;  // an address in bounds when nothing is read
#pragma unroll
    for (int i = 0; i < kNarrowRows; ++i) {
      if (m0 + i < m) {
        cp_async_zfill<V>(stage + i * C::kLd + V * tid, a + (m0 + i) * lda + kin, bytes);
      }
    }
#pragma unroll
    for (int i = 0; i < kNarrowN; ++i) {
      if (i < n) {
        cp_async_zfill<V>(stage + (kNarrowRows + i) * C::kLd + V * tid, w + i * ldw + kin, bytes);
      }
    }
  };
#pragma unroll
  for (int t = 0; t < C::kStages - 1; ++t) {
    if (t < num_chunks) load(t);
    cp_async_commit();
  }
  // Only the threads of an element inside C run a chain (at one row and 8 experts, 8 of the
  // 128; the rest keep to the barriers): the other threads' shared-memory reads had the L1 47 %
  // busy (ncu), and skipping them took the H200's 1 × 8 × 4096 router GEMM from 27.7 to 24.4 µs.
  // What is left, ~12 cycles per k against the fmaf's 4, is the shared-memory load latency on
  // the chain; reading operands ahead into registers measured slower (48.9 µs, 2026-11-28).
  const bool live = m0 + r < m && j < n;
  float acc = 0.f;
  for (int ch = 0; ch < num_chunks; ++ch) {
    cp_async_wait<C::kStages - 2>();
    __syncthreads();  // chunk ch landed for every thread; stage (ch − 1) is free again
    if (ch + C::kStages - 1 < num_chunks) load(ch + C::kStages - 1);
    cp_async_commit();
    if (!live) continue;
    const float* stage = narrow_smem + (ch % C::kStages) * C::kStageFloats;
    const float* ar = stage + r * C::kLd;
    const float* wr = stage + (kNarrowRows + j) * C::kLd;
    const int64_t left = k - static_cast<int64_t>(ch) * C::kK;
    const int kend = left < C::kK ? static_cast<int>(left) : C::kK;
    const float4* a4 = reinterpret_cast<const float4*>(ar);
    const float4* w4 = reinterpret_cast<const float4*>(wr);
#pragma unroll 8
    for (int q = 0; q < kend / 4; ++q) {
      acc = fma_chain4(a4[q], w4[q], acc);
    }
    for (int kk = kend & ~3; kk < kend; ++kk) acc = fmaf(ar[kk], wr[kk], acc);
  }
  cp_async_wait<0>();
  const int64_t gm = m0 + r;
  if (live) c[gm * ldc + j] = bias != nullptr ? acc + bias[j] : acc;
}

template <int V>
void launch_narrow(const float* a, int64_t lda, const float* w, int64_t ldw, const float* bias,
                   float* c, int64_t ldc, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  allow_shared_memory(gemm_f32_narrow_kernel<V>, NarrowConfig<V>::kSmemBytes);
  gemm_f32_narrow_kernel<V>
      <<<static_cast<unsigned>((m + kNarrowRows - 1) / kNarrowRows), kNarrowThreads,
         NarrowConfig<V>::kSmemBytes, stream>>>(a, lda, w, ldw, bias, c, ldc, m, n, k);
}

__global__ void __launch_bounds__(kF32Threads)
    gemm_f32_kernel(const float* a, int64_t lda, const float* w, int64_t ldw, const float* bias,
                    float* c, int64_t ldc, int64_t m, int64_t n, int64_t k) {
  f32_tile(a, lda, w, ldw, bias, c, ldc, m, n, k, static_cast<int64_t>(blockIdx.y) * kF32Tile,
           static_cast<int64_t>(blockIdx.x) * kF32Tile);
}

// ---- bf16: tensor cores (WMMA), f32 accumulate -----------------------------------------------
//
// One tile-kernel body for two configurations (64 and 128 rows), beside the decode kernel
// below and the sm_90 kernel (gemm_sm90.cu). Every one of them computes an output element as
// the same sequence of MMAs: acc = 0, then for each 16-wide chunk of k in ascending order that
// starts below K, acc = mma(a[chunk], w[chunk], acc) (the m16n8k16 instruction the WMMA
// 16×16×16 fragment lowers to). Tile height, width, stage depth and warp layout only decide
// which block and warp run that sequence, so a row gets the same bits in every configuration,
// hence whatever M picked it. Chunks wholly beyond K are skipped, never run on zeros, so
// even the sign of a zero cannot differ.

template <int BM_, int BN_, int BK_, int STAGES_, int WARPS_M_, int WARPS_N_>
struct Bf16Config {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, STAGES = STAGES_;
  static constexpr int WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
  static constexpr int kThreads = 32 * WARPS_M * WARPS_N;
  static constexpr int kLd = BK + 8;  // shared row stride (elements): rows start 16 B apart
  static constexpr int kWarpRows = BM / WARPS_M, kWarpCols = BN / WARPS_N;
  static constexpr int kFragsM = kWarpRows / 16, kFragsN = kWarpCols / 16;
  static constexpr int kPipeBytes = STAGES * (BM + BN) * kLd * 2;
  static constexpr int kEpilogueBytes = WARPS_M * WARPS_N * 256 * 4;
  static constexpr int kSmemBytes = kPipeBytes > kEpilogueBytes ? kPipeBytes : kEpilogueBytes;
  static_assert(kWarpRows % 16 == 0 && kWarpCols % 16 == 0 && BK % 16 == 0, "WMMA tiles");
  static_assert((kLd * 2 * 16) % 32 == 0, "fragment rows must stay 32-byte aligned");
};
// Mid-size batches; prefill and large expert batches. (Decode batches of up to 16 rows run
// the warp-streaming kernel below, DecodeConfig.)
using MidM = Bf16Config<64, 64, 64, 4, 2, 2>;
using LargeM = Bf16Config<128, 256, 64, 3, 2, 4>;
static_assert(LargeM::BM == sm90::kTileRows, "a plan's 128-row tiles serve either kernel");

// ---- bf16 decode: up to 16 rows, weights streamed warp by warp --------------------------------
//
// At a few rows a GEMM is a stream over the weights: the time is the bytes of W over the
// bandwidth the SM keeps in flight. Here every warp owns 8 columns of C over all of K and
// streams its 8 rows of W (and the MA rows of A) through its own ring of `STAGES` shared-memory
// stages of 128 k, filled by cp.async and read by ldmatrix, with no barrier but __syncwarp:
// the SM holds 2·(STAGES − 1) KiB of W in flight per warp whatever the other warps do. An element
// of C is the same sequence as in bf16_tile: acc = +0, then one m16n8k16 MMA (PTX mma.sync, the
// instruction a WMMA 16×16×16 bf16 MMA is two of, one per 8 columns) per 16-wide chunk of k
// in ascending order, for the chunks that start below K; a chunk's k at or beyond K holds zeros
// in both operands, as in bf16_stage_load. So a row's bits do not change when M moves a batch
// between this kernel and the tile kernels (CudaGemm.Bf16RowsAreBatchInvariant checks it).

template <int MA_, int STAGES_>
struct DecodeConfig {
  static constexpr int MA = MA_;  // rows of A per tile: 8 (rows 8..15 of the MMA are zero) or 16
  static constexpr int STAGES = STAGES_;
  static constexpr int kWarps = 4, kThreads = 32 * kWarps;
  static constexpr int BN = 8 * kWarps;  // columns per block
  static constexpr int BK = 128;         // k per stage: eight 16-wide chunks
  static constexpr int kChunks = BK / 16;
  static constexpr int kLd = BK + 8;  // 272-byte rows: ldmatrix's 8 rows hit distinct banks
  static constexpr int kStageElems = (8 + MA) * kLd;  // W's 8 rows, then A's MA rows
  static constexpr int kWarpElems = STAGES * kStageElems;
  static constexpr int kSmemBytes = kWarps * kWarpElems * 2;
  static constexpr int BM = MA;  // rows a block (launch_dense)
};
// Ring depth against warps per SM, by the columns there are to share out: under 8,192 columns
// (fewer than ~1,000 warps of 8) each warp needs a deep ring, 26 KiB: 8 warps per SM (two
// 102 KiB blocks) with 10 (M ≤ 8) or 6 KiB (M ≤ 16) of W in flight each. From 8,192 columns
// M ≤ 8 takes 3 stages, 51 KiB a block: 16 warps per SM, twice the instructions in flight to
// stream the same bytes. M ≤ 16 keeps its 4 stages there: 3 would still fit only two blocks
// per SM (76.5 KiB each), the same 8 warps with a shallower ring.
template <int MA, bool kWide>
using DecodeFor = DecodeConfig<MA, MA == 8 ? (kWide ? 3 : 6) : 4>;
constexpr int64_t kDecodeWideN = 8192;

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x2(unsigned& r0, unsigned& r1, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(smem_addr(p)));
}
// acc (16×8, f32) = a (16×16, bf16, row) · b (16×8, bf16, col) + acc: mma.sync m16n8k16.
__device__ __forceinline__ void mma_bf16_16816(float (&acc)[4], const unsigned (&a)[4], unsigned b0,
                                               unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Columns [n0, n0 + 8) × rows [m0, m0 + MA) of C, by one warp, through `ring` (its
// STAGES × kStageElems shared elements).
template <typename C>
__device__ __forceinline__ void bf16_decode_warp(const uint16_t* __restrict__ a, int64_t lda,
                                                 const uint16_t* __restrict__ w, int64_t ldw,
                                                 const float* __restrict__ bias,
                                                 float* __restrict__ c, int64_t ldc, int64_t m,
                                                 int64_t n, int64_t k, int64_t m0, int64_t n0,
                                                 uint16_t* ring) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int num_tiles = static_cast<int>((k + C::BK - 1) / C::BK);
  // This lane's 16-byte pieces of a stage: W's 8 rows, then A's MA rows, 8 pieces a row. A
  // piece of a row past N or M has no source and stays zero in every slot (zeroed here, never
  // written again); a piece of a real row is copied, or zeroed where it lies past K (K is a
  // multiple of 8: a piece is all in or all out).
  constexpr int kPieces = (8 + C::MA) * (C::BK / 8) / 32;
  const uint16_t* src[kPieces];
  int dst[kPieces], kc[kPieces];
#pragma unroll
  for (int i = 0; i < kPieces; ++i) {
    const int p = lane + 32 * i, row = p / (C::BK / 8);
    kc[i] = (p % (C::BK / 8)) * 8;
    dst[i] = row * C::kLd + kc[i];
    const bool is_w = row < 8;
    const int64_t gr = is_w ? n0 + row : m0 + row - 8;
    src[i] = gr >= (is_w ? n : m) ? nullptr : is_w ? w + gr * ldw + kc[i] : a + gr * lda + kc[i];
    if (src[i] == nullptr) {
      for (int s = 0; s < C::STAGES; ++s) {
        *reinterpret_cast<uint4*>(ring + s * C::kStageElems + dst[i]) = make_uint4(0, 0, 0, 0);
      }
    }
  }
  // A piece past K is filled with zeros by cp.async itself (source size 0, no bytes read; the
  // address given is the row's first piece, in bounds).
  auto load = [&](int tile) {
    uint16_t* slot = ring + (tile % C::STAGES) * C::kStageElems;
    const int64_t k0 = static_cast<int64_t>(tile) * C::BK;
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
      if (src[i] == nullptr) continue;
      const bool in_k = k0 + kc[i] < k;
      cp_async16_zfill(slot + dst[i], in_k ? src[i] + k0 : src[i], in_k ? 16 : 0);
    }
  };
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int t = 0; t < C::STAGES - 1; ++t) {
    if (t < num_tiles) load(t);
    cp_async_commit();
  }
  // ldmatrix row addresses: lane l gives row l % 8 of matrix l / 8.
  const int q = lane / 8, r8 = lane % 8;
  for (int kt = 0; kt < num_tiles; ++kt) {
    cp_async_wait<C::STAGES - 2>();  // this lane's pieces of tile kt have landed
    __syncwarp();                    // ... every lane's; slot (kt − 1) is free again
    if (kt + C::STAGES - 1 < num_tiles) load(kt + C::STAGES - 1);
    cp_async_commit();
    const uint16_t* slot = ring + (kt % C::STAGES) * C::kStageElems;
    const uint16_t* as = slot + 8 * C::kLd;
    // Every fragment of the tile first, so that their shared-memory latency overlaps; then the
    // chain of MMAs. W: per pair of chunks, k 0–7 and 8–15 of each (b0, b1 of both).
    unsigned b[C::kChunks / 2][4], fa[C::kChunks][4];
#pragma unroll
    for (int pair = 0; pair < C::kChunks / 2; ++pair) {
      ldmatrix_x4(b[pair], slot + r8 * C::kLd + pair * 32 + q * 8);
    }
#pragma unroll
    for (int chunk = 0; chunk < C::kChunks; ++chunk) {
      if constexpr (C::MA == 16) {
        // Matrices (rows 0–7, k 0–7), (rows 8–15, k 0–7), (rows 0–7, k 8–15), (8–15, 8–15).
        ldmatrix_x4(fa[chunk], as + (r8 + 8 * (q & 1)) * C::kLd + chunk * 16 + 8 * (q >> 1));
      } else {
        // Rows 8–15 do not exist: a1 = a3 = 0. Lanes 0–7 address k 0–7, lanes 8–15 k 8–15.
        ldmatrix_x2(fa[chunk][0], fa[chunk][2], as + r8 * C::kLd + chunk * 16 + 8 * (q & 1));
        fa[chunk][1] = 0;
        fa[chunk][3] = 0;
      }
    }
    const int64_t left = k - static_cast<int64_t>(kt) * C::BK;  // > 0
    if (left >= C::BK) {
#pragma unroll
      for (int chunk = 0; chunk < C::kChunks; ++chunk) {
        mma_bf16_16816(acc, fa[chunk], b[chunk / 2][2 * (chunk % 2)],
                       b[chunk / 2][2 * (chunk % 2) + 1]);
      }
    } else {
      // The last, partial tile: only the chunks that start below K.
#pragma unroll
      for (int chunk = 0; chunk < C::kChunks; ++chunk) {
        if (16 * chunk >= left) break;
        mma_bf16_16816(acc, fa[chunk], b[chunk / 2][2 * (chunk % 2)],
                       b[chunk / 2][2 * (chunk % 2) + 1]);
      }
    }
  }
  cp_async_wait<0>();
  // acc: (row g, columns 2t, 2t + 1), then (row g + 8, the same columns); g = lane / 4.
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int64_t gm = m0 + g + 8 * (e / 2), gn = n0 + 2 * t + (e % 2);
    if (gm < m && gm < m0 + C::MA && gn < n) {
      c[gm * ldc + gn] = bias != nullptr ? acc[e] + bias[gn] : acc[e];
    }
  }
}

template <typename C>
__global__ void __launch_bounds__(C::kThreads)
    gemm_bf16_decode_kernel(const uint16_t* a, int64_t lda, const uint16_t* w, int64_t ldw,
                            const float* bias, float* c, int64_t ldc, int64_t m, int64_t n,
                            int64_t k) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * C::kWarps + warp) * 8;
  if (n0 >= n) return;
  bf16_decode_warp<C>(a, lda, w, ldw, bias, c, ldc, m, n, k,
                      static_cast<int64_t>(blockIdx.y) * C::MA, n0,
                      reinterpret_cast<uint16_t*>(smem) + warp * C::kWarpElems);
}

// Copies rows [r0, r0 + ROWS) × k [k0, k0 + BK) of a bf16 matrix into shared [ROWS, kLd];
// 16-byte chunks outside the matrix are zero (k is a multiple of 8: a chunk is all in or out).
template <typename C, int ROWS>
__device__ __forceinline__ void bf16_stage_load(uint16_t* dst, const uint16_t* src, int64_t ld,
                                                int64_t limit_rows, int64_t k, int64_t r0,
                                                int64_t k0) {
  constexpr int kChunksPerRow = C::BK / 8;
  for (int ch = static_cast<int>(threadIdx.x); ch < ROWS * kChunksPerRow; ch += C::kThreads) {
    const int row = ch / kChunksPerRow, kc = (ch % kChunksPerRow) * 8;
    const int64_t gr = r0 + row, gk = k0 + kc;
    uint16_t* d = dst + row * C::kLd + kc;
    if (gr < limit_rows && gk < k) {
      cp_async16(d, src + gr * ld + gk);
    } else {
      *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
    }
  }
}

template <typename C>
__device__ __forceinline__ void bf16_tile(const uint16_t* __restrict__ a, int64_t lda,
                                          const uint16_t* __restrict__ w, int64_t ldw,
                                          const float* __restrict__ bias, float* __restrict__ c,
                                          int64_t ldc, int64_t m, int64_t n, int64_t k, int64_t m0,
                                          int64_t n0, unsigned char* smem) {
  using namespace nvcuda;
  uint16_t* as = reinterpret_cast<uint16_t*>(smem);
  uint16_t* ws = as + C::STAGES * C::BM * C::kLd;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int wm = warp / C::WARPS_N, wn = warp % C::WARPS_N;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[C::kFragsM][C::kFragsN];
#pragma unroll
  for (int i = 0; i < C::kFragsM; ++i) {
#pragma unroll
    for (int j = 0; j < C::kFragsN; ++j) wmma::fill_fragment(acc[i][j], 0.f);
  }
  const int64_t num_k_tiles = (k + C::BK - 1) / C::BK;
  auto load = [&](int64_t tile) {
    const int s = static_cast<int>(tile % C::STAGES);
    bf16_stage_load<C, C::BM>(as + s * C::BM * C::kLd, a, lda, m, k, m0, tile * C::BK);
    bf16_stage_load<C, C::BN>(ws + s * C::BN * C::kLd, w, ldw, n, k, n0, tile * C::BK);
  };
  // Prologue: tiles 0 .. STAGES−2 in flight (a group per tile, empty past the last).
#pragma unroll
  for (int t = 0; t < C::STAGES - 1; ++t) {
    if (t < num_k_tiles) load(t);
    cp_async_commit();
  }
  for (int64_t kt = 0; kt < num_k_tiles; ++kt) {
    cp_async_wait<C::STAGES - 2>();  // tile kt has landed
    __syncthreads();                 // ... for every thread; stage (kt − 1) is free again
    if (kt + C::STAGES - 1 < num_k_tiles) load(kt + C::STAGES - 1);
    cp_async_commit();
    const int s = static_cast<int>(kt % C::STAGES);
    const uint16_t* sa = as + s * C::BM * C::kLd;
    const uint16_t* sw = ws + s * C::BN * C::kLd;
    // One 16-wide chunk of k: the fragments of this warp's tile, then their MMAs.
    auto chunk = [&](int kk) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[C::kFragsM];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb[C::kFragsN];
#pragma unroll
      for (int i = 0; i < C::kFragsM; ++i) {
        wmma::load_matrix_sync(
            fa[i],
            reinterpret_cast<const __nv_bfloat16*>(sa + (wm * C::kWarpRows + i * 16) * C::kLd + kk),
            C::kLd);
      }
#pragma unroll
      for (int j = 0; j < C::kFragsN; ++j) {
        wmma::load_matrix_sync(
            fb[j],
            reinterpret_cast<const __nv_bfloat16*>(sw + (wn * C::kWarpCols + j * 16) * C::kLd + kk),
            C::kLd);
      }
#pragma unroll
      for (int i = 0; i < C::kFragsM; ++i) {
#pragma unroll
        for (int j = 0; j < C::kFragsN; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
      }
    };
    if ((kt + 1) * C::BK <= k) {
      // A whole tile: every chunk, unrolled without a bound check.
#pragma unroll
      for (int kk = 0; kk < C::BK; kk += 16) chunk(kk);
    } else {
      // The last, partial tile: only the chunks that start below K (uniform over the block).
      for (int kk = 0; kk < C::BK && kt * C::BK + kk < k; kk += 16) chunk(kk);
    }
  }
  cp_async_wait<0>();
  __syncthreads();
  // Epilogue through a per-warp 16×16 staging tile (the pipeline's memory, free now):
  // bounds-checked stores, bias added last.
  float* stage = reinterpret_cast<float*>(smem) + warp * 256;
#pragma unroll
  for (int i = 0; i < C::kFragsM; ++i) {
#pragma unroll
    for (int j = 0; j < C::kFragsN; ++j) {
      wmma::store_matrix_sync(stage, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        const int64_t gm = m0 + wm * C::kWarpRows + i * 16 + e / 16;
        const int64_t gn = n0 + wn * C::kWarpCols + j * 16 + e % 16;
        if (gm < m && gn < n) c[gm * ldc + gn] = bias != nullptr ? stage[e] + bias[gn] : stage[e];
      }
      __syncwarp();
    }
  }
}

template <typename C>
__global__ void __launch_bounds__(C::kThreads)
    gemm_bf16_kernel(const uint16_t* a, int64_t lda, const uint16_t* w, int64_t ldw,
                     const float* bias, float* c, int64_t ldc, int64_t m, int64_t n, int64_t k) {
  extern __shared__ __align__(128) unsigned char smem[];
  bf16_tile<C>(a, lda, w, ldw, bias, c, ldc, m, n, k, static_cast<int64_t>(blockIdx.y) * C::BM,
               static_cast<int64_t>(blockIdx.x) * C::BN, smem);
}

template <typename C>
__global__ void __launch_bounds__(C::kThreads)
    grouped_bf16_kernel(const GemmGroup* groups, const int32_t* tile_start, int num_groups,
                        int64_t n, int64_t k) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int tile = static_cast<int>(blockIdx.y);
  const int g = group_of_tile(tile_start, num_groups, tile);
  const GemmGroup gr = groups[g];
  bf16_tile<C>(static_cast<const uint16_t*>(gr.a), k, static_cast<const uint16_t*>(gr.w), k,
               nullptr, gr.c, n, gr.m, n, k, static_cast<int64_t>(tile - tile_start[g]) * C::BM,
               static_cast<int64_t>(blockIdx.x) * C::BN, smem);
}

template <typename C>
__global__ void __launch_bounds__(C::kThreads)
    grouped_bf16_decode_kernel(const GemmGroup* groups, const int32_t* tile_start, int num_groups,
                               int64_t n, int64_t k) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * C::kWarps + warp) * 8;
  if (n0 >= n) return;
  const int tile = static_cast<int>(blockIdx.y);
  const int g = group_of_tile(tile_start, num_groups, tile);
  const GemmGroup gr = groups[g];
  bf16_decode_warp<C>(static_cast<const uint16_t*>(gr.a), k, static_cast<const uint16_t*>(gr.w), k,
                      nullptr, gr.c, n, gr.m, n, k,
                      static_cast<int64_t>(tile - tile_start[g]) * C::MA, n0,
                      reinterpret_cast<uint16_t*>(smem) + warp * C::kWarpElems);
}

__global__ void __launch_bounds__(kF32Threads)
    grouped_f32_kernel(const GemmGroup* groups, const int32_t* tile_start, int num_groups,
                       int64_t n, int64_t k) {
  const int tile = static_cast<int>(blockIdx.y);
  const int g = group_of_tile(tile_start, num_groups, tile);
  const GemmGroup gr = groups[g];
  f32_tile(static_cast<const float*>(gr.a), k, static_cast<const float*>(gr.w), k, nullptr, gr.c, n,
           gr.m, n, k, static_cast<int64_t>(tile - tile_start[g]) * kF32Tile,
           static_cast<int64_t>(blockIdx.x) * kF32Tile);
}

// One launch of bf16 kernel `kernel` of configuration C (BN columns × BM rows a block).
template <typename C, typename Kernel>
void launch_dense(Kernel kernel, const uint16_t* a, int64_t lda, const uint16_t* w, int64_t ldw,
                  const float* bias, float* c, int64_t ldc, int64_t m, int64_t n, int64_t k,
                  cudaStream_t stream) {
  MUFLOW_ASSERT((m + C::BM - 1) / C::BM <= 65535, "cuda gemm_bf16: too many rows for one launch");
  allow_shared_memory(kernel, C::kSmemBytes);
  const dim3 grid(static_cast<unsigned>((n + C::BN - 1) / C::BN),
                  static_cast<unsigned>((m + C::BM - 1) / C::BM));
  kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(a, lda, w, ldw, bias, c, ldc, m, n, k);
}

// The same for a grouped kernel: `total_tiles` row tiles of BM rows.
template <typename C, typename Kernel>
void launch_grouped(Kernel kernel, const GemmGroup* groups, const int32_t* starts, int num_groups,
                    int total_tiles, int64_t n, int64_t k, cudaStream_t stream) {
  allow_shared_memory(kernel, C::kSmemBytes);
  const dim3 grid(static_cast<unsigned>((n + C::BN - 1) / C::BN),
                  static_cast<unsigned>(total_tiles));
  kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(groups, starts, num_groups, n, k);
}

template <int MA>
void launch_dense_bf16_decode(const uint16_t* a, int64_t lda, const uint16_t* w, int64_t ldw,
                              const float* bias, float* c, int64_t ldc, int64_t m, int64_t n,
                              int64_t k, cudaStream_t stream) {
  using Wide = DecodeFor<MA, true>;
  using Deep = DecodeFor<MA, false>;
  if (n >= kDecodeWideN) {
    launch_dense<Wide>(gemm_bf16_decode_kernel<Wide>, a, lda, w, ldw, bias, c, ldc, m, n, k,
                       stream);
  } else {
    launch_dense<Deep>(gemm_bf16_decode_kernel<Deep>, a, lda, w, ldw, bias, c, ldc, m, n, k,
                       stream);
  }
}

template <int MA>
void launch_grouped_bf16_decode(const GemmGroup* groups, const int32_t* starts, int num_groups,
                                int total_tiles, int64_t n, int64_t k, cudaStream_t stream) {
  using Wide = DecodeFor<MA, true>;
  using Deep = DecodeFor<MA, false>;
  if (n >= kDecodeWideN) {
    launch_grouped<Wide>(grouped_bf16_decode_kernel<Wide>, groups, starts, num_groups, total_tiles,
                         n, k, stream);
  } else {
    launch_grouped<Deep>(grouped_bf16_decode_kernel<Deep>, groups, starts, num_groups, total_tiles,
                         n, k, stream);
  }
}

// The configuration for batches of `rows` rows (per group, on average, when grouped).
int bf16_tile_rows(int64_t rows) {
  return rows <= 8 ? 8 : rows <= 16 ? 16 : rows <= 64 ? MidM::BM : LargeM::BM;
}

void check_sizes(int64_t lda, int64_t ldw, int64_t ldc, int64_t m, int64_t n, int64_t k) {
  MUFLOW_ASSERT(m >= 0 && n >= 0 && k >= 0, "cuda gemm: negative size");
  MUFLOW_ASSERT(lda >= k && ldw >= k && ldc >= n, "cuda gemm: leading dimension too small");
}

void check_bf16_layout(const void* a, int64_t lda, const void* w, int64_t ldw, int64_t k) {
  MUFLOW_ASSERT(k % 8 == 0 && lda % 8 == 0 && ldw % 8 == 0,
                "cuda gemm_bf16: k, lda and ldw must be multiples of 8");
  MUFLOW_ASSERT(
      reinterpret_cast<uintptr_t>(a) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0,
      "cuda gemm_bf16: A and W must be 16-byte aligned");
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::size_t gemm_shared_bytes() {
  // The narrow f32 kernel's 16-byte ring asks for opt-in shared memory too.
  return static_cast<std::size_t>(
      std::max({DecodeFor<8, false>::kSmemBytes, DecodeFor<16, false>::kSmemBytes, MidM::kSmemBytes,
                LargeM::kSmemBytes, NarrowConfig<4>::kSmemBytes}));
}

void gemm_f32(const float* a, int64_t lda, const float* w, int64_t ldw, const float* bias, float* c,
              int64_t ldc, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  check_sizes(lda, ldw, ldc, m, n, k);
  if (m == 0 || n == 0) return;
  if (n <= kNarrowN) {  // the same bits as the tile kernel (see gemm_f32_narrow_kernel)
    MUFLOW_ASSERT(ceil_div(m, kNarrowRows) <= INT32_MAX, "cuda gemm_f32: too many rows");
    // 16-byte copies where every row starts 16-byte aligned.
    const bool aligned = lda % 4 == 0 && ldw % 4 == 0 && reinterpret_cast<uintptr_t>(a) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(w) % 16 == 0;
    if (aligned) {
      launch_narrow<4>(a, lda, w, ldw, bias, c, ldc, m, n, k, stream);
    } else {
      launch_narrow<1>(a, lda, w, ldw, bias, c, ldc, m, n, k, stream);
    }
    MUFLOW_CUDA_LAUNCH_CHECK();
    return;
  }
  MUFLOW_ASSERT(ceil_div(m, kF32Tile) <= 65535, "cuda gemm_f32: too many rows for one launch");
  const dim3 grid(static_cast<unsigned>(ceil_div(n, kF32Tile)),
                  static_cast<unsigned>(ceil_div(m, kF32Tile)));
  gemm_f32_kernel<<<grid, kF32Threads, 0, stream>>>(a, lda, w, ldw, bias, c, ldc, m, n, k);
  MUFLOW_CUDA_LAUNCH_CHECK();
}

void gemm_bf16(const uint16_t* a, int64_t lda, const uint16_t* w, int64_t ldw, const float* bias,
               float* c, int64_t ldc, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  check_sizes(lda, ldw, ldc, m, n, k);
  check_bf16_layout(a, lda, w, ldw, k);
  if (m == 0 || n == 0) return;
  switch (bf16_tile_rows(m)) {
    case 8:
      launch_dense_bf16_decode<8>(a, lda, w, ldw, bias, c, ldc, m, n, k, stream);
      break;
    case 16:
      launch_dense_bf16_decode<16>(a, lda, w, ldw, bias, c, ldc, m, n, k, stream);
      break;
    case MidM::BM:
      launch_dense<MidM>(gemm_bf16_kernel<MidM>, a, lda, w, ldw, bias, c, ldc, m, n, k, stream);
      break;
    default:
      // Hopper: warpgroup MMAs, the same bits (gemm_sm90.hpp).
      if (sm90::available()) {
        sm90::gemm_bf16(a, lda, w, ldw, bias, c, ldc, m, n, k, stream);
      } else {
        launch_dense<LargeM>(gemm_bf16_kernel<LargeM>, a, lda, w, ldw, bias, c, ldc, m, n, k,
                             stream);
      }
      break;
  }
  MUFLOW_CUDA_LAUNCH_CHECK();
}

GroupedGemmPlan GroupedGemmPlan::make(std::vector<GemmGroup> groups, bool bf16) {
  GroupedGemmPlan p;
  int64_t rows = 0, busy = 0;
  for (const GemmGroup& g : groups) {
    MUFLOW_ASSERT(g.m >= 0, "GroupedGemmPlan: negative rows");
    rows += g.m;
    busy += g.m > 0 ? 1 : 0;
  }
  // Any tile height gives the same bits (gemm.hpp); pick the one that wastes less: decode
  // sends a few rows to each expert, prefill hundreds.
  p.bf16 = bf16;
  p.tile_rows = !bf16 ? kF32Tile : bf16_tile_rows(busy > 0 ? (rows + busy - 1) / busy : 1);
  p.tile_start.reserve(groups.size() + 1);
  int64_t tiles = 0;
  for (const GemmGroup& g : groups) {
    p.tile_start.push_back(static_cast<int32_t>(tiles));
    tiles += ceil_div(g.m, p.tile_rows);
  }
  p.tile_start.push_back(static_cast<int32_t>(tiles));
  MUFLOW_ASSERT(tiles <= 65535, "GroupedGemmPlan: too many row tiles for one launch");
  p.total_tiles = static_cast<int32_t>(tiles);
  p.groups = std::move(groups);
  return p;
}

std::size_t GroupedGemmPlan::bytes() const {
  return groups.size() * sizeof(GemmGroup) + tile_start.size() * sizeof(int32_t);
}

void GroupedGemmPlan::pack(void* out) const {
  auto* bytes_out = static_cast<unsigned char*>(out);
  std::memcpy(bytes_out, groups.data(), groups.size() * sizeof(GemmGroup));
  std::memcpy(bytes_out + groups.size() * sizeof(GemmGroup), tile_start.data(),
              tile_start.size() * sizeof(int32_t));
}

namespace {
std::pair<const GemmGroup*, const int32_t*> unpack(const GroupedGemmPlan& plan,
                                                   const void* packed) {
  const auto* base = static_cast<const unsigned char*>(packed);
  return {reinterpret_cast<const GemmGroup*>(base),
          reinterpret_cast<const int32_t*>(base + plan.groups.size() * sizeof(GemmGroup))};
}
}  // namespace

void grouped_gemm_bf16(const GroupedGemmPlan& plan, const void* packed, int64_t n, int64_t k,
                       cudaStream_t stream) {
  check_sizes(k, k, n, 0, n, k);
  MUFLOW_ASSERT(plan.bf16, "cuda grouped_gemm_bf16: plan made for f32");
  MUFLOW_ASSERT(k % 8 == 0, "cuda grouped_gemm_bf16: k must be a multiple of 8");
  for (const GemmGroup& g : plan.groups) check_bf16_layout(g.a, k, g.w, k, k);
  if (plan.total_tiles == 0 || n == 0) return;
  const auto [groups, starts] = unpack(plan, packed);
  const int num_groups = static_cast<int>(plan.groups.size());
  switch (plan.tile_rows) {
    case 8:
      launch_grouped_bf16_decode<8>(groups, starts, num_groups, plan.total_tiles, n, k, stream);
      break;
    case 16:
      launch_grouped_bf16_decode<16>(groups, starts, num_groups, plan.total_tiles, n, k, stream);
      break;
    case MidM::BM:
      launch_grouped<MidM>(grouped_bf16_kernel<MidM>, groups, starts, num_groups, plan.total_tiles,
                           n, k, stream);
      break;
    case LargeM::BM:
      if (sm90::available()) {
        sm90::grouped_gemm_bf16(groups, starts, num_groups, plan.total_tiles, n, k, stream);
      } else {
        launch_grouped<LargeM>(grouped_bf16_kernel<LargeM>, groups, starts, num_groups,
                               plan.total_tiles, n, k, stream);
      }
      break;
    default:
      MUFLOW_ASSERT(false, "grouped_gemm_bf16: a plan with an unknown tile height");
  }
  MUFLOW_CUDA_LAUNCH_CHECK();
}

void grouped_gemm_f32(const GroupedGemmPlan& plan, const void* packed, int64_t n, int64_t k,
                      cudaStream_t stream) {
  check_sizes(k, k, n, 0, n, k);
  MUFLOW_ASSERT(!plan.bf16 && plan.tile_rows == kF32Tile, "grouped_gemm_f32: plan made for bf16");
  if (plan.total_tiles == 0 || n == 0) return;
  const auto [groups, starts] = unpack(plan, packed);
  const dim3 grid(static_cast<unsigned>(ceil_div(n, kF32Tile)),
                  static_cast<unsigned>(plan.total_tiles));
  grouped_f32_kernel<<<grid, kF32Threads, 0, stream>>>(groups, starts,
                                                       static_cast<int>(plan.groups.size()), n, k);
  MUFLOW_CUDA_LAUNCH_CHECK();
}

}  // namespace muflow::kernels::cuda
