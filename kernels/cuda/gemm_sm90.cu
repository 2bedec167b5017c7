#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>

#include "kernels/assert.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/gemm_common.cuh"
#include "kernels/cuda/gemm_sm90.hpp"

namespace muflow::kernels::cuda::sm90 {
namespace {

// Tile 128 × 256, 64 k per stage, four stages. Three warpgroups: warpgroup 0 loads (the
// producer), warpgroups 1 and 2 each multiply the tile's 64-row half against all 256 columns
// (one m64n256k16 per 16-wide chunk of k) and write it out (the consumers).
constexpr int BM = kTileRows, BN = 256, BK = 64, STAGES = 4;
constexpr int kConsumers = 2;
constexpr int kThreads = 128 * (1 + kConsumers);
// Registers per thread after the split (setmaxnreg; 384 threads start at 168 of the SM's
// 65,536): the producer keeps addresses and a loop, a consumer 128 accumulators and the rest.
// 128 · 40 + 256 · 232 = 64,512.
[[maybe_unused]] constexpr int kProducerRegs = 40, kConsumerRegs = 232;
// Tiles are visited in bands of kRasterRows row tiles, column tile by column tile within a
// band, row tile fastest: the blocks resident at one time (one per SM) then share a band's
// rows of A (16 × 128 rows) and a few column tiles of W, which stay in L2 while each is read
// by every block that needs it, instead of a wave walking down all rows of A for one column.
[[maybe_unused]] constexpr int kRasterRows = 16;
constexpr int kAStageBytes = BM * BK * 2, kBStageBytes = BN * BK * 2;
constexpr int kStageBytes = kAStageBytes + kBStageBytes;
// The stages, their full and empty barriers (8 bytes each), and 1 KiB to align the stages to
// the swizzle's 1,024 bytes.
constexpr int kSmemBytes = STAGES * kStageBytes + 2 * STAGES * 8 + 1024;

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MUFLOW_SM90A_DEVICE 1
#endif

// One output tile's operands: rows [m0, m0 + 128) of A (m rows) against columns
// [n0, n0 + 256) of W (n rows), into C (+ bias, or null).
struct Tile {
  const uint16_t* a;
  int64_t lda;
  const uint16_t* w;
  int64_t ldw;
  const float* bias;
  float* c;
  int64_t ldc, m, n, m0, n0;
};

// One dense GEMM's tiles: row_tiles × col_tiles of C (m × n); `whole` is the GEMM's operands
// (m0 = n0 = 0).
struct DenseTiles {
  Tile whole;
  int row_tiles, col_tiles;
};

// A grouped plan's tiles: row tile rt belongs to the last group whose tile_start is ≤ rt.
struct GroupedTiles {
  const GemmGroup* groups;
  const int32_t* tile_start;
  int num_groups, row_tiles, col_tiles;
  int64_t n, k;
};

#if defined(MUFLOW_SM90A_DEVICE)

// Linear tile `i` of a row_tiles × col_tiles grid in the banded order above.
__device__ __forceinline__ void raster(int i, int row_tiles, int col_tiles, int& rt, int& ct) {
  const auto first = static_cast<int>(i / (int64_t{kRasterRows} * col_tiles) * kRasterRows);
  const int rows = min(kRasterRows, row_tiles - first);
  const auto within = static_cast<int>(i - int64_t{first} * col_tiles);
  rt = first + within % rows;
  ct = within / rows;
}

template <typename Tiles>
__device__ __forceinline__ int tile_count(const Tiles& t) {
  return t.row_tiles * t.col_tiles;
}

__device__ __forceinline__ Tile tile_at(const DenseTiles& d, int i) {
  int rt = 0, ct = 0;
  raster(i, d.row_tiles, d.col_tiles, rt, ct);
  Tile t = d.whole;
  t.m0 = int64_t{rt} * BM;
  t.n0 = int64_t{ct} * BN;
  return t;
}

__device__ __forceinline__ Tile tile_at(const GroupedTiles& p, int i) {
  int rt = 0, ct = 0;
  raster(i, p.row_tiles, p.col_tiles, rt, ct);
  const int g = group_of_tile(p.tile_start, p.num_groups, rt);
  const GemmGroup gr = p.groups[g];
  return {static_cast<const uint16_t*>(gr.a),
          p.k,
          static_cast<const uint16_t*>(gr.w),
          p.k,
          nullptr,
          gr.c,
          p.n,
          gr.m,
          p.n,
          int64_t{rt - p.tile_start[g]} * BM,
          int64_t{ct} * BN};
}

// ---- mbarriers (PTX ISA "mbarrier"), CTA scope ------------------------------------------------

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}
// Blocks until the barrier's phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (done == 0);
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(
                   smem_addr(bar))
               : "memory");
}
// One arrival on `bar` once every cp.async this thread issued before has landed (the
// barrier's count includes it: .noinc).
__device__ __forceinline__ void cp_async_arrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar))
               : "memory");
}

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

// A producer thread's share of one operand of a tile (R rows from r0 of a bf16 matrix with
// `rows` rows, leading dimension ld): with 128 threads, 8 to a 128-byte row (k 8c .. 8c + 7
// for lane c = p mod 8), rows 4·warp + lane / 8 + 16·s for s = 0 .. R/16 − 1. Where a row
// lies below the matrix or a chunk beyond K, the copy reads nothing and writes zeros.
struct OperandCopy {
  const uint16_t* src;   // row (r0 + first row) of the matrix, at this thread's chunk
  const uint16_t* base;  // the matrix's first element (the address a zero-fill copy names)
  int64_t step;          // 16 rows, in elements
  int valid;             // rows s < valid lie inside the matrix
  int dst;               // byte offset of the first row's chunk in the operand (swizzled)

  __device__ __forceinline__ OperandCopy(const uint16_t* m, int64_t ld, int64_t rows, int64_t r0,
                                         int p) {
    const int warp = p / 32, lane = p % 32, chunk = lane % 8, row = 4 * warp + lane / 8;
    base = m;
    src = m + (r0 + row) * ld + 8 * chunk;
    step = 16 * ld;
    const int64_t left = rows - r0 - row;  // rows from this thread's first to the end
    valid = left <= 0 ? 0 : left >= 16 * 256 ? 256 : static_cast<int>((left + 15) / 16);
    dst = row * 128 + ((chunk ^ (row & 7)) << 4);  // (row + 16 s) mod 8 = row mod 8
  }

  // k tile at element k0 (in_k: this thread's chunk starts below K) into `operand`.
  template <int R>
  __device__ __forceinline__ void load(unsigned char* operand, int64_t k0, bool in_k) const {
    const uint16_t* from = src + k0;
#pragma unroll 4
    for (int s = 0; s < R / 16; ++s) {
      const bool in = in_k && s < valid;
      cp_async16_zfill(operand + dst + 2048 * s, in ? from : base, in ? 16 : 0);
      from += step;
    }
  }
};

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

// Pins the accumulators: the compiler may not read or move them across this point (the
// wgmma writing them is asynchronous until wgmma.wait_group).
__device__ __forceinline__ void fence_accumulators(float (&d)[128]) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Warpgroup 0: for each of this block's tiles, each k tile into the next stage once the
// consumers have released it (empty), then one arrival on the stage's full barrier per thread
// when its copies have landed.
template <typename Tiles>
__device__ __forceinline__ void produce(const Tiles& tiles, int64_t k, unsigned char* smem,
                                        uint64_t* full, uint64_t* empty) {
  const int p = static_cast<int>(threadIdx.x);
  const int num_k_tiles = static_cast<int>((k + BK - 1) / BK);
  uint32_t j = 0;  // k tiles loaded by this block, over all its tiles
  for (int i = static_cast<int>(blockIdx.x); i < tile_count(tiles);
       i += static_cast<int>(gridDim.x)) {
    const Tile t = tile_at(tiles, i);
    const OperandCopy a(t.a, t.lda, t.m, t.m0, p), w(t.w, t.ldw, t.n, t.n0, p);
    const int64_t chunk_k = 8 * (p % 8);
    for (int kt = 0; kt < num_k_tiles; ++kt, ++j) {
      const int s = static_cast<int>(j % STAGES);
      if (j >= STAGES) mbar_wait(&empty[s], ((j / STAGES) + 1) & 1);
      unsigned char* stage = smem + s * kStageBytes;
      const int64_t k0 = static_cast<int64_t>(kt) * BK;
      const bool in_k = k0 + chunk_k < k;
      a.template load<BM>(stage, k0, in_k);
      w.template load<BN>(stage + kAStageBytes, k0, in_k);
      cp_async_arrive(&full[s]);
    }
  }
  // Its last copies land before it exits (they were never committed as a group: wait_all).
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

// Warpgroups 1 and 2 (`cw` 0, 1: rows 64·cw .. 64·cw + 63 of each tile): each k tile's MMAs
// once its stage is full, one k tile's MMAs left in flight while the next stage is awaited;
// a stage is released (one arrival per warp) once the MMAs that read it have completed.
template <typename Tiles>
__device__ __forceinline__ void consume(const Tiles& tiles, int64_t k, const unsigned char* smem,
                                        uint64_t* full, uint64_t* empty, int cw) {
  const int warp = (static_cast<int>(threadIdx.x) % 128) / 32,
            lane = static_cast<int>(threadIdx.x) % 32;
  const int num_k_tiles = static_cast<int>((k + BK - 1) / BK);
  uint32_t j = 0;  // k tiles consumed by this block, over all its tiles
  for (int i = static_cast<int>(blockIdx.x); i < tile_count(tiles);
       i += static_cast<int>(gridDim.x)) {
    const Tile t = tile_at(tiles, i);
    float acc[128];
#pragma unroll
    for (int e = 0; e < 128; ++e) acc[e] = 0.f;
    for (int kt = 0; kt < num_k_tiles; ++kt, ++j) {
      const int s = static_cast<int>(j % STAGES);
      mbar_wait(&full[s], (j / STAGES) & 1);
      // cp.async wrote through the generic proxy, wgmma reads through the async one.
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      const unsigned char* stage = smem + s * kStageBytes;
      const unsigned char* sa = stage + cw * 64 * 128;
      const unsigned char* sb = stage + kAStageBytes;
      const int64_t left = k - static_cast<int64_t>(kt) * BK;  // > 0
      asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
      if (left >= BK) {
#pragma unroll
        for (int ch = 0; ch < BK / 16; ++ch) {
          wgmma_m64n256k16(acc, descriptor(sa + 32 * ch), descriptor(sb + 32 * ch));
        }
      } else {
        // The last, partial k tile: only the chunks that start below K (uniform over the
        // warpgroup, as wgmma requires).
        for (int ch = 0; 16 * ch < left; ++ch) {
          wgmma_m64n256k16(acc, descriptor(sa + 32 * ch), descriptor(sb + 32 * ch));
        }
      }
      asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
      // The previous k tile's MMAs (this warp's part) have completed: its stage is free.
      if (kt > 0 && lane == 0) mbar_arrive(&empty[(j - 1) % STAGES]);
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    fence_accumulators(acc);
    if (lane == 0 && num_k_tiles > 0) mbar_arrive(&empty[(j - 1) % STAGES]);
    // acc[4q + e]: row 16·warp + lane / 4 (+ 8 for e ≥ 2) of this warpgroup's 64, column
    // 8q + 2·(lane % 4) + e % 2 (PTX ISA, the m64nNk16 accumulator fragment); bias added last.
    const int64_t row = t.m0 + cw * 64 + 16 * warp + lane / 4;
#pragma unroll
    for (int q = 0; q < 32; ++q) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t gm = row + 8 * (e / 2), gn = t.n0 + 8 * q + 2 * (lane % 4) + e % 2;
        if (gm < t.m && gn < t.n) {
          t.c[gm * t.ldc + gn] = t.bias != nullptr ? acc[4 * q + e] + t.bias[gn] : acc[4 * q + e];
        }
      }
    }
  }
}

#endif  // MUFLOW_SM90A_DEVICE

// A persistent launch (one block per SM at most): block b runs tiles b, b + gridDim.x, ... of
// `tiles`, its producer loading the next tile's stages while the consumers finish and write
// the last one.
template <typename Tiles>
__global__ void __launch_bounds__(kThreads, 1) persistent_kernel(const Tiles tiles, int64_t k) {
#if defined(MUFLOW_SM90A_DEVICE)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + (1024 - __cvta_generic_to_shared(smem_raw) % 1024) % 1024;
  auto* full = reinterpret_cast<uint64_t*>(smem + STAGES * kStageBytes);
  uint64_t* empty = full + STAGES;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 128);              // the producer's threads
      mbar_init(&empty[s], 4 * kConsumers);  // the consumers' warps
    }
  }
  __syncthreads();
  const int wg = static_cast<int>(threadIdx.x) / 128;
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    produce(tiles, k, smem, full, empty);
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
    consume(tiles, k, smem, full, empty, wg - 1);
  }
#else
  __trap();  // never launched: available() is false where the build has no sm_90a code
#endif
}

// Per device: 0 not asked yet, else the SM count (devices past the table are asked every time).
int sm_count() {
  static std::array<std::atomic<int>, 64> known{};
  int device = 0, sms = 0;
  MUFLOW_CUDA_ASSERT(cudaGetDevice(&device));
  const bool cached = device >= 0 && static_cast<size_t>(device) < known.size();
  if (cached) {
    const int n = known[static_cast<size_t>(device)].load(std::memory_order_relaxed);
    if (n != 0) return n;
  }
  MUFLOW_CUDA_ASSERT(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (cached) known[static_cast<size_t>(device)].store(sms, std::memory_order_relaxed);
  return sms;
}

template <typename Tiles>
void launch(const Tiles& tiles, int64_t count, int64_t k, cudaStream_t stream) {
  if (count == 0) return;  // (no tile: a grid of 0 blocks is a launch error)
  allow_shared_memory(persistent_kernel<Tiles>, kSmemBytes);
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(count, sm_count()));
  persistent_kernel<Tiles><<<blocks, kThreads, kSmemBytes, stream>>>(tiles, k);
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
  const int64_t row_tiles = (m + BM - 1) / BM, col_tiles = (n + BN - 1) / BN;
  MUFLOW_ASSERT(row_tiles * col_tiles <= INT32_MAX / 2,
                "cuda gemm_bf16 (sm90): more than 2^30 tiles in one launch");
  const DenseTiles tiles{{a, lda, w, ldw, bias, c, ldc, m, n, 0, 0},
                         static_cast<int>(row_tiles),
                         static_cast<int>(col_tiles)};
  launch(tiles, row_tiles * col_tiles, k, stream);
}

void grouped_gemm_bf16(const GemmGroup* groups, const int32_t* tile_start, int num_groups,
                       int total_tiles, int64_t n, int64_t k, cudaStream_t stream) {
  MUFLOW_ASSERT(available(), "cuda grouped_gemm_bf16 (sm90): not an sm_90 GPU or no sm_90a code");
  MUFLOW_ASSERT(k % 8 == 0, "cuda grouped_gemm_bf16 (sm90): k must be a multiple of 8");
  const int64_t col_tiles = (n + BN - 1) / BN;
  MUFLOW_ASSERT(int64_t{total_tiles} * col_tiles <= INT32_MAX / 2,
                "cuda grouped_gemm_bf16 (sm90): more than 2^30 tiles in one launch");
  const GroupedTiles tiles{groups, tile_start, num_groups, total_tiles, static_cast<int>(col_tiles),
                           n,      k};
  launch(tiles, int64_t{total_tiles} * col_tiles, k, stream);
}

}  // namespace muflow::kernels::cuda::sm90
