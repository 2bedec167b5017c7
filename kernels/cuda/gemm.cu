#include <cuda_bf16.h>
#include <mma.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "kernels/assert.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/gemm.hpp"

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
// 384-wide chunks that all its threads load at once; thread (r, j) then runs the same fmaf
// chain over k ascending from +0 for element (r, j), so the bits are the tile kernel's.
constexpr int kNarrowN = 16, kNarrowRows = 8, kNarrowK = 384;
constexpr int kNarrowThreads = kNarrowN * kNarrowRows;

__global__ void __launch_bounds__(kNarrowThreads)
    gemm_f32_narrow_kernel(const float* __restrict__ a, int64_t lda, const float* __restrict__ w,
                           int64_t ldw, const float* __restrict__ bias, float* __restrict__ c,
                           int64_t ldc, int64_t m, int64_t n, int64_t k) {
  __shared__ float as[kNarrowRows][kNarrowK + 1];
  __shared__ float ws[kNarrowN][kNarrowK + 1];
  const int tid = static_cast<int>(threadIdx.x);
  const int r = tid / kNarrowN, j = tid % kNarrowN;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kNarrowRows;
  float acc = 0.f;
  for (int64_t k0 = 0; k0 < k; k0 += kNarrowK) {
    const int kend = static_cast<int>(k - k0 < kNarrowK ? k - k0 : kNarrowK);
    // All loads first (independent, so they overlap), then the shared stores.
    constexpr int kA = kNarrowRows * kNarrowK / kNarrowThreads;
    constexpr int kW = kNarrowN * kNarrowK / kNarrowThreads;
    float ra[kA], rw[kW];
#pragma unroll
    for (int i = 0; i < kA; ++i) {
      const int e = tid + i * kNarrowThreads, row = e / kNarrowK, kk = e % kNarrowK;
      ra[i] = (m0 + row < m && kk < kend) ? a[(m0 + row) * lda + k0 + kk] : 0.f;
    }
#pragma unroll
    for (int i = 0; i < kW; ++i) {
      const int e = tid + i * kNarrowThreads, col = e / kNarrowK, kk = e % kNarrowK;
      rw[i] = (col < n && kk < kend) ? w[col * ldw + k0 + kk] : 0.f;
    }
#pragma unroll
    for (int i = 0; i < kA; ++i) {
      const int e = tid + i * kNarrowThreads;
      as[e / kNarrowK][e % kNarrowK] = ra[i];
    }
#pragma unroll
    for (int i = 0; i < kW; ++i) {
      const int e = tid + i * kNarrowThreads;
      ws[e / kNarrowK][e % kNarrowK] = rw[i];
    }
    __syncthreads();
    for (int kk = 0; kk < kend; ++kk) acc = fmaf(as[r][kk], ws[j][kk], acc);
    __syncthreads();
  }
  const int64_t gm = m0 + r;
  if (gm < m && j < n) c[gm * ldc + j] = bias != nullptr ? acc + bias[j] : acc;
}

__global__ void __launch_bounds__(kF32Threads)
    gemm_f32_kernel(const float* a, int64_t lda, const float* w, int64_t ldw, const float* bias,
                    float* c, int64_t ldc, int64_t m, int64_t n, int64_t k) {
  f32_tile(a, lda, w, ldw, bias, c, ldc, m, n, k, static_cast<int64_t>(blockIdx.y) * kF32Tile,
           static_cast<int64_t>(blockIdx.x) * kF32Tile);
}

// ---- bf16: tensor cores (WMMA), f32 accumulate -----------------------------------------------
//
// One kernel body for three tile configurations. Every one of them computes an output element
// as the same sequence of MMAs: acc = 0, then for each 16-wide chunk of k in ascending order
// that starts below K, acc = mma(a[chunk], w[chunk], acc) (the m16n8k16 instruction the WMMA
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
// Decode: a few rows, weights streamed by many narrow blocks with deep pipelines (bytes in
// flight per SM); mid-size batches; prefill and large expert batches.
using SmallM = Bf16Config<16, 32, 128, 8, 1, 2>;
using MidM = Bf16Config<64, 64, 64, 4, 2, 2>;
using LargeM = Bf16Config<128, 256, 64, 3, 2, 4>;

__device__ __forceinline__ void cp_async16(void* smem_dst, const void* gmem_src) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem_src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
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

// The group of row tile `tile`: the last group whose first tile is ≤ tile (empty groups own
// no tile and are skipped by taking the last).
__device__ __forceinline__ int group_of_tile(const int32_t* tile_start, int num_groups, int tile) {
  int lo = 0, hi = num_groups - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_start[mid] <= tile) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
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

// Dynamic shared memory above 48 KiB must be allowed once per kernel and device (the
// instantiations share one function type, so the record is keyed by the kernel's address).
template <typename Kernel>
void allow_shared_memory(Kernel kernel, int bytes) {
  static std::mutex mu;
  static std::set<std::pair<const void*, int>> done;
  int device = 0;
  MUFLOW_CUDA_ASSERT(cudaGetDevice(&device));
  const std::pair<const void*, int> key{reinterpret_cast<const void*>(kernel), device};
  std::lock_guard<std::mutex> lock(mu);
  if (done.count(key) > 0) return;
  MUFLOW_CUDA_ASSERT(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  done.insert(key);
}

template <typename C>
void launch_dense_bf16(const uint16_t* a, int64_t lda, const uint16_t* w, int64_t ldw,
                       const float* bias, float* c, int64_t ldc, int64_t m, int64_t n, int64_t k,
                       cudaStream_t stream) {
  MUFLOW_ASSERT((m + C::BM - 1) / C::BM <= 65535, "cuda gemm_bf16: too many rows for one launch");
  allow_shared_memory(gemm_bf16_kernel<C>, C::kSmemBytes);
  const dim3 grid(static_cast<unsigned>((n + C::BN - 1) / C::BN),
                  static_cast<unsigned>((m + C::BM - 1) / C::BM));
  gemm_bf16_kernel<C>
      <<<grid, C::kThreads, C::kSmemBytes, stream>>>(a, lda, w, ldw, bias, c, ldc, m, n, k);
}

template <typename C>
void launch_grouped_bf16(const GemmGroup* groups, const int32_t* starts, int num_groups,
                         int total_tiles, int64_t n, int64_t k, cudaStream_t stream) {
  allow_shared_memory(grouped_bf16_kernel<C>, C::kSmemBytes);
  const dim3 grid(static_cast<unsigned>((n + C::BN - 1) / C::BN),
                  static_cast<unsigned>(total_tiles));
  grouped_bf16_kernel<C>
      <<<grid, C::kThreads, C::kSmemBytes, stream>>>(groups, starts, num_groups, n, k);
}

// The configuration for batches of `rows` rows (per group, on average, when grouped).
int bf16_tile_rows(int64_t rows) {
  return rows <= 16 ? SmallM::BM : rows <= 64 ? MidM::BM : LargeM::BM;
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

std::size_t gemm_bf16_shared_bytes() {
  return static_cast<std::size_t>(
      std::max({SmallM::kSmemBytes, MidM::kSmemBytes, LargeM::kSmemBytes}));
}

void gemm_f32(const float* a, int64_t lda, const float* w, int64_t ldw, const float* bias, float* c,
              int64_t ldc, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  check_sizes(lda, ldw, ldc, m, n, k);
  if (m == 0 || n == 0) return;
  if (n <= kNarrowN) {  // the same bits as the tile kernel (see gemm_f32_narrow_kernel)
    MUFLOW_ASSERT(ceil_div(m, kNarrowRows) <= INT32_MAX, "cuda gemm_f32: too many rows");
    gemm_f32_narrow_kernel<<<static_cast<unsigned>(ceil_div(m, kNarrowRows)), kNarrowThreads, 0,
                             stream>>>(a, lda, w, ldw, bias, c, ldc, m, n, k);
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
    case SmallM::BM:
      launch_dense_bf16<SmallM>(a, lda, w, ldw, bias, c, ldc, m, n, k, stream);
      break;
    case MidM::BM:
      launch_dense_bf16<MidM>(a, lda, w, ldw, bias, c, ldc, m, n, k, stream);
      break;
    default:
      launch_dense_bf16<LargeM>(a, lda, w, ldw, bias, c, ldc, m, n, k, stream);
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
  MUFLOW_ASSERT(k % 8 == 0, "cuda grouped_gemm_bf16: k must be a multiple of 8");
  for (const GemmGroup& g : plan.groups) check_bf16_layout(g.a, k, g.w, k, k);
  if (plan.total_tiles == 0 || n == 0) return;
  const auto [groups, starts] = unpack(plan, packed);
  const int num_groups = static_cast<int>(plan.groups.size());
  switch (plan.tile_rows) {
    case SmallM::BM:
      launch_grouped_bf16<SmallM>(groups, starts, num_groups, plan.total_tiles, n, k, stream);
      break;
    case MidM::BM:
      launch_grouped_bf16<MidM>(groups, starts, num_groups, plan.total_tiles, n, k, stream);
      break;
    case LargeM::BM:
      launch_grouped_bf16<LargeM>(groups, starts, num_groups, plan.total_tiles, n, k, stream);
      break;
    default:
      MUFLOW_ASSERT(false, "grouped_gemm_bf16: plan made for f32");
  }
  MUFLOW_CUDA_LAUNCH_CHECK();
}

void grouped_gemm_f32(const GroupedGemmPlan& plan, const void* packed, int64_t n, int64_t k,
                      cudaStream_t stream) {
  check_sizes(k, k, n, 0, n, k);
  MUFLOW_ASSERT(plan.tile_rows == kF32Tile, "grouped_gemm_f32: plan made for bf16");
  if (plan.total_tiles == 0 || n == 0) return;
  const auto [groups, starts] = unpack(plan, packed);
  const dim3 grid(static_cast<unsigned>(ceil_div(n, kF32Tile)),
                  static_cast<unsigned>(plan.total_tiles));
  grouped_f32_kernel<<<grid, kF32Threads, 0, stream>>>(groups, starts,
                                                       static_cast<int>(plan.groups.size()), n, k);
  MUFLOW_CUDA_LAUNCH_CHECK();
}

}  // namespace muflow::kernels::cuda
