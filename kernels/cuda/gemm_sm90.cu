#include <array>
#include <atomic>
#include <cstdint>

#include "kernels/assert.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/gemm_common.cuh"
#include "kernels/cuda/gemm_sm90.hpp"

namespace muflow::kernels::cuda::sm90 {
namespace {

// Tile 128 × 256 × 64 k per stage; two warpgroups, each the tile's 64-row half against all 256
// columns (one m64n256k16 per 16-wide chunk of k); four stages.
constexpr int BM = kTileRows, BN = 256, BK = 64, STAGES = 4;
// MMAs a warpgroup leaves in flight past the end of a k tile: 0, so three tiles load ahead
// (1, one tile's MMAs overlapping the next tile's barrier, loads two ahead: measured 1–12 %
// slower at 256–4,096 tokens per expert on the H200, bench/README.md "CUDA backend").
[[maybe_unused]] constexpr int kMmaInFlight = 0;
constexpr int kThreads = 256;
constexpr int kAStageBytes = BM * BK * 2, kBStageBytes = BN * BK * 2;
constexpr int kStageBytes = kAStageBytes + kBStageBytes;
// The stages, and 1 KiB to align them to the swizzle's 1,024 bytes.
constexpr int kSmemBytes = STAGES * kStageBytes + 1024;

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MUFLOW_SM90A_DEVICE 1
#endif

#if defined(MUFLOW_SM90A_DEVICE)

// A stage holds each operand (R rows × 64 k, 128 bytes a row) in the 128-byte-swizzled K-major
// layout of the PTX ISA: row r at byte 128·r, its 16-byte chunk c (k 8c .. 8c + 7) at chunk
// position c XOR (r mod 8), so a warp's copy of 4 whole rows writes 512 contiguous bytes (no
// bank conflict) from 4 whole 128-byte lines (no half-used L2 requests). Operand bases are
// 1,024-byte aligned, so the swizzle the MMA applies to address bits [4, 7) from bits [7, 10)
// is the one used here. The descriptor of the 16-wide chunk ch of 64 rows starting at row r0:
// start address base + 128·r0 + 32·ch, stride byte offset 1,024 (the next 8 rows), leading
// byte offset unused (one swizzle atom spans the 64 k), swizzle mode 1 (128 bytes).
__device__ __forceinline__ uint64_t descriptor(const unsigned char* smem) {
  const auto addr = static_cast<uint64_t>(__cvta_generic_to_shared(smem));
  return ((addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}

// Rows [r0, r0 + R) × k [k0, k0 + 64) of a bf16 matrix into a stage's operand; chunks outside
// the matrix are zero-filled (no bytes read; the address given is the matrix's first).
template <int R>
__device__ __forceinline__ void load_operand(unsigned char* dst, const uint16_t* src, int64_t ld,
                                             int64_t rows, int64_t k, int64_t r0, int64_t k0) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int chunk = lane % 8;
#pragma unroll
  for (int s = 0; s < R / 4 / (kThreads / 32); ++s) {
    const int row = 4 * (warp + s * (kThreads / 32)) + lane / 8;
    const int64_t gr = r0 + row, gk = k0 + 8 * chunk;
    const bool in = gr < rows && gk < k;
    cp_async16_zfill(dst + row * 128 + ((chunk ^ (row & 7)) << 4), in ? src + gr * ld + gk : src,
                     in ? 16 : 0);
  }
}

// d (64×256 f32: this thread's 128 values) += A (64×16) · B (16×256), both from shared
// memory through their descriptors; asynchronous until wgmma.wait_group.
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a,
                                                 uint64_t desc_b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "
      "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, "
      "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, "
      "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, "
      "%66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, "
      "%82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, "
      "%98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "
      "%111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, "
      "%124, %125, %126, %127"
      "}, %128, %129, 1, 1, 1, 0, 0;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
        "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
        "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
        "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
        "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
        "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
        "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
        "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b));
}

#endif  // MUFLOW_SM90A_DEVICE

// Rows [m0, m0 + 128) × columns [n0, n0 + 256) of C.
__device__ __forceinline__ void tile(const uint16_t* __restrict__ a, int64_t lda,
                                     const uint16_t* __restrict__ w, int64_t ldw,
                                     const float* __restrict__ bias, float* __restrict__ c,
                                     int64_t ldc, int64_t m, int64_t n, int64_t k, int64_t m0,
                                     int64_t n0, unsigned char* smem) {
#if defined(MUFLOW_SM90A_DEVICE)
  smem += (1024 - __cvta_generic_to_shared(smem) % 1024) % 1024;
  const int wg = static_cast<int>(threadIdx.x) / 128;
  const int num_k_tiles = static_cast<int>((k + BK - 1) / BK);
  auto load = [&](int t) {
    unsigned char* stage = smem + (t % STAGES) * kStageBytes;
    load_operand<BM>(stage, a, lda, m, k, m0, static_cast<int64_t>(t) * BK);
    load_operand<BN>(stage + kAStageBytes, w, ldw, n, k, n0, static_cast<int64_t>(t) * BK);
  };
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.f;
  // kAhead tiles in flight. Tile t + kAhead is loaded into the slot tile t + kAhead − STAGES
  // used: its MMAs are complete, as each iteration waits for all but its last kMmaInFlight.
  constexpr int kAhead = STAGES - 1 - kMmaInFlight;
#pragma unroll
  for (int t = 0; t < kAhead; ++t) {
    if (t < num_k_tiles) load(t);
    cp_async_commit();
  }
  for (int kt = 0; kt < num_k_tiles; ++kt) {
    cp_async_wait<kAhead - 1>();  // this thread's copies of tile kt have landed
    // cp.async wrote through the generic proxy, wgmma reads through the async one.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();  // every thread's copies; every warpgroup's MMAs of the slot's last tile
    if (kt + kAhead < num_k_tiles) load(kt + kAhead);
    cp_async_commit();
    const unsigned char* stage = smem + (kt % STAGES) * kStageBytes;
    const unsigned char* sa = stage + wg * 64 * 128;  // this warpgroup's rows 64wg .. 64wg + 63
    const unsigned char* sb = stage + kAStageBytes;
    const int64_t left = k - static_cast<int64_t>(kt) * BK;  // > 0
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    if (left >= BK) {
#pragma unroll
      for (int ch = 0; ch < BK / 16; ++ch) {
        wgmma_m64n256k16(acc, descriptor(sa + 32 * ch), descriptor(sb + 32 * ch));
      }
    } else {
      // The last, partial tile: only the chunks that start below K (uniform over the
      // warpgroup, as wgmma requires).
      for (int ch = 0; 16 * ch < left; ++ch) {
        wgmma_m64n256k16(acc, descriptor(sa + 32 * ch), descriptor(sb + 32 * ch));
      }
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kMmaInFlight) : "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  cp_async_wait<0>();
  // acc[4j + e]: row 16·warp + lane / 4 (+ 8 for e ≥ 2) of this warpgroup's 64, column
  // 8j + 2·(lane % 4) + e % 2 (PTX ISA, the m64nNk16 accumulator fragment); bias added last.
  const int warp = (static_cast<int>(threadIdx.x) % 128) / 32,
            lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t row = m0 + wg * 64 + 16 * warp + lane / 4;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t gm = row + 8 * (e / 2), gn = n0 + 8 * j + 2 * (lane % 4) + e % 2;
      if (gm < m && gn < n) {
        c[gm * ldc + gn] = bias != nullptr ? acc[4 * j + e] + bias[gn] : acc[4 * j + e];
      }
    }
  }
#else
  __trap();  // never launched: available() is false where the build has no sm_90a code
#endif
}

// Row tiles vary fastest, so the blocks resident together share W's column tiles (read from
// DRAM once, then from L2) while A, the smaller operand, stays in L2.
__global__ void __launch_bounds__(kThreads, 1)
    gemm_kernel(const uint16_t* a, int64_t lda, const uint16_t* w, int64_t ldw, const float* bias,
                float* c, int64_t ldc, int64_t m, int64_t n, int64_t k) {
  extern __shared__ __align__(1024) unsigned char smem[];
  tile(a, lda, w, ldw, bias, c, ldc, m, n, k, static_cast<int64_t>(blockIdx.x) * BM,
       static_cast<int64_t>(blockIdx.y) * BN, smem);
}

__global__ void __launch_bounds__(kThreads, 1)
    grouped_kernel(const GemmGroup* groups, const int32_t* tile_start, int num_groups, int64_t n,
                   int64_t k) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const int t = static_cast<int>(blockIdx.x);
  const int g = group_of_tile(tile_start, num_groups, t);
  const GemmGroup gr = groups[g];
  tile(static_cast<const uint16_t*>(gr.a), k, static_cast<const uint16_t*>(gr.w), k, nullptr, gr.c,
       n, gr.m, n, k, static_cast<int64_t>(t - tile_start[g]) * BM,
       static_cast<int64_t>(blockIdx.y) * BN, smem);
}

void launch_dense(const uint16_t* a, int64_t lda, const uint16_t* w, int64_t ldw, const float* bias,
                  float* c, int64_t ldc, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  allow_shared_memory(gemm_kernel, kSmemBytes);
  const dim3 grid(static_cast<unsigned>((m + BM - 1) / BM),
                  static_cast<unsigned>((n + BN - 1) / BN));
  gemm_kernel<<<grid, kThreads, kSmemBytes, stream>>>(a, lda, w, ldw, bias, c, ldc, m, n, k);
}

void launch_grouped(const GemmGroup* groups, const int32_t* tile_start, int num_groups,
                    int total_tiles, int64_t n, int64_t k, cudaStream_t stream) {
  allow_shared_memory(grouped_kernel, kSmemBytes);
  const dim3 grid(static_cast<unsigned>(total_tiles), static_cast<unsigned>((n + BN - 1) / BN));
  grouped_kernel<<<grid, kThreads, kSmemBytes, stream>>>(groups, tile_start, num_groups, n, k);
}

}  // namespace

bool available() {
#if defined(MUFLOW_CUDA_HAVE_SM90A)
  // Per device: 0 not asked yet, 1 no, 2 yes (devices past the table are asked every time).
  static std::array<std::atomic<int8_t>, 64> known{};
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  const bool cached = device >= 0 && static_cast<size_t>(device) < known.size();
  if (cached) {
    const int8_t k = known[static_cast<size_t>(device)].load(std::memory_order_relaxed);
    if (k != 0) return k == 2;
  }
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    return false;
  }
  if (cached)
    known[static_cast<size_t>(device)].store(major == 9 ? 2 : 1, std::memory_order_relaxed);
  return major == 9;
#else
  return false;
#endif
}

void gemm_bf16(const uint16_t* a, int64_t lda, const uint16_t* w, int64_t ldw, const float* bias,
               float* c, int64_t ldc, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  MUFLOW_ASSERT(available(), "cuda gemm_bf16 (sm90): not an sm_90 GPU or no sm_90a code");
  MUFLOW_ASSERT(k % 8 == 0 && lda % 8 == 0 && ldw % 8 == 0 &&
                    reinterpret_cast<uintptr_t>(a) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(w) % 16 == 0,
                "cuda gemm_bf16 (sm90): k, lda, ldw multiples of 8 and A, W 16-byte aligned");
  MUFLOW_ASSERT((n + BN - 1) / BN <= 65535,
                "cuda gemm_bf16 (sm90): too many columns for one launch");
  launch_dense(a, lda, w, ldw, bias, c, ldc, m, n, k, stream);
}

void grouped_gemm_bf16(const GemmGroup* groups, const int32_t* tile_start, int num_groups,
                       int total_tiles, int64_t n, int64_t k, cudaStream_t stream) {
  MUFLOW_ASSERT(available(), "cuda grouped_gemm_bf16 (sm90): not an sm_90 GPU or no sm_90a code");
  MUFLOW_ASSERT(k % 8 == 0, "cuda grouped_gemm_bf16 (sm90): k must be a multiple of 8");
  MUFLOW_ASSERT((n + BN - 1) / BN <= 65535, "cuda grouped_gemm_bf16 (sm90): too many columns");
  launch_grouped(groups, tile_start, num_groups, total_tiles, n, k, stream);
}

}  // namespace muflow::kernels::cuda::sm90
