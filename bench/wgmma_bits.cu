// Does Hopper's warpgroup MMA (wgmma.mma_async m64n8k16, bf16 in, f32 accumulate) give the
// same bits as the m16n8k16 mma.sync that muflow's bf16 GEMMs chain (kernels/cuda/gemm.cu)?
// The answer decides how a wgmma kernel for large batches can keep the batch-invariance rule
// (kernels/README.md): if the bits match, it can serve large M beside the mma.sync kernels; if
// not, one instruction must serve every M. Issue #20, grouped GEMM target.
//
// Both chains run C[64, 8] = Σ over 16-wide chunks of k, ascending, from +0, on the same
// seeded bf16 A [64, K] and W [8, K] whose exponents span 2^±10 (so the MMAs' alignment and
// rounding of the 16 products matter). The wgmma operands are staged in shared memory in the
// no-swizzle K-major layout (8-row × 16-byte core matrices, PTX ISA "Matrix Descriptor Format":
// the leading byte offset steps along k, the stride byte offset along rows); both results are
// checked against a double-precision reference. Prints, per trial, the mismatched elements.
// Usage: wgmma_bits [K]   (sm_90a only; exit 0 when it ran, whatever it found)
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cpu/bf16.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/reference/test_inputs.hpp"

namespace {

constexpr int kM = 64, kN = 8;

__device__ __forceinline__ unsigned pack2(const uint16_t* p) {
  return static_cast<unsigned>(p[0]) | (static_cast<unsigned>(p[1]) << 16);
}

// Warp w: rows 16w .. 16w + 15; fragments read straight from global memory in the m16n8k16
// layout (g = lane / 4, t = lane % 4).
__global__ void mma_sync_chain(const uint16_t* a, const uint16_t* w, float* c, int k) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const uint16_t* a0 = a + static_cast<int64_t>(16 * warp + g) * k;
  const uint16_t* a8 = a0 + 8 * static_cast<int64_t>(k);
  const uint16_t* b = w + static_cast<int64_t>(g) * k;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int k0 = 0; k0 < k; k0 += 16) {
    const unsigned r0 = pack2(a0 + k0 + 2 * t), r1 = pack2(a8 + k0 + 2 * t);
    const unsigned r2 = pack2(a0 + k0 + 2 * t + 8), r3 = pack2(a8 + k0 + 2 * t + 8);
    const unsigned b0 = pack2(b + k0 + 2 * t), b1 = pack2(b + k0 + 2 * t + 8);
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(r0), "r"(r1), "r"(r2), "r"(r3), "r"(b0), "r"(b1));
  }
  for (int e = 0; e < 4; ++e) c[(16 * warp + g + 8 * (e / 2)) * kN + 2 * t + e % 2] = acc[e];
}

__device__ __forceinline__ uint64_t descriptor(const void* smem, unsigned lbo, unsigned sbo) {
  const auto addr = static_cast<uint64_t>(__cvta_generic_to_shared(smem));
  return ((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32);  // base offset 0, swizzle 0 (none)
}

// One warpgroup. Core matrix (row group i, k group j) of a chunk at byte i·256 + j·128: k
// groups 128 bytes apart (leading byte offset), row groups 256 (stride byte offset).
__global__ void wgmma_chain(const uint16_t* a, const uint16_t* w, float* c, int k) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ __align__(256) uint16_t sa[kM * 16];
  __shared__ __align__(256) uint16_t sw[kN * 16];
  const int tid = threadIdx.x;
  constexpr unsigned lbo = 128, sbo = 256;
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  for (int k0 = 0; k0 < k; k0 += 16) {
    for (int i = tid; i < kM * 16; i += 128) {
      const int r = i / 16, kk = i % 16;
      sa[((r / 8) * 2 + kk / 8) * 64 + (r % 8) * 8 + kk % 8] =
          a[static_cast<int64_t>(r) * k + k0 + kk];
    }
    for (int i = tid; i < kN * 16; i += 128) {
      const int r = i / 16, kk = i % 16;
      sw[(kk / 8) * 64 + r * 8 + kk % 8] = w[static_cast<int64_t>(r) * k + k0 + kk];
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const uint64_t da = descriptor(sa, lbo, sbo), db = descriptor(sw, lbo, sbo);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, 1, 1, 1, "
        "0, 0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "l"(da), "l"(db)
        : "memory");
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    __syncthreads();
  }
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  for (int e = 0; e < 4; ++e) c[(16 * warp + g + 8 * (e / 2)) * kN + 2 * t + e % 2] = d[e];
#else
  if (threadIdx.x == 0) c[0] = NAN;  // not built for sm_90a
#endif
}

using muflow::kernels::cpu::bf16_to_f32;
using muflow::kernels::cpu::f32_to_bf16;

}  // namespace

int main(int argc, char** argv) {
  const int k = argc > 1 ? std::atoi(argv[1]) : 4096;
  if (k <= 0 || k % 16 != 0 || k > (1 << 20)) {
    std::fprintf(stderr, "usage: wgmma_bits [K]  (K a positive multiple of 16, at most 2^20)\n");
    return 2;
  }
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDeviceCount(&dev) != cudaSuccess || dev == 0) {
    std::fprintf(stderr, "wgmma_bits: no CUDA device\n");
    return 1;
  }
  MUFLOW_CUDA_ASSERT(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9) {
    std::fprintf(stderr, "wgmma_bits: needs an sm_90 GPU, found %s (sm_%d%d)\n", prop.name,
                 prop.major, prop.minor);
    return 1;
  }
  std::printf("# %s, K %d\n", prop.name, k);
  for (int trial = 0; trial < 4; ++trial) {
    muflow::kernels::reference::SplitMix64 rng(1000 + trial);
    // bf16 values m · 2^e, m uniform in ±[1, 2), e uniform in [−10, 10].
    auto draw = [&](size_t count) {
      std::vector<uint16_t> v(count);
      for (uint16_t& x : v) {
        const uint64_t r = rng.next();
        const int e = static_cast<int>(r % 21) - 10;
        const float m = 1.f + static_cast<float>((r >> 8) & 0x7F) / 128.f;
        x = f32_to_bf16(std::ldexp((r >> 20) & 1 ? -m : m, e));  // exact: 7 fraction bits
      }
      return v;
    };
    const std::vector<uint16_t> a = draw(static_cast<size_t>(kM) * k), w = draw(size_t{kN} * k);
    uint16_t *da, *dw;
    float* dc;
    MUFLOW_CUDA_ASSERT(cudaMalloc(&da, a.size() * 2));
    MUFLOW_CUDA_ASSERT(cudaMalloc(&dw, w.size() * 2));
    MUFLOW_CUDA_ASSERT(cudaMalloc(&dc, 2 * kM * kN * 4));
    MUFLOW_CUDA_ASSERT(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
    MUFLOW_CUDA_ASSERT(cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
    mma_sync_chain<<<1, 128>>>(da, dw, dc, k);
    wgmma_chain<<<1, 128>>>(da, dw, dc + kM * kN, k);
    MUFLOW_CUDA_ASSERT(cudaGetLastError());
    std::vector<float> c(2 * kM * kN);
    MUFLOW_CUDA_ASSERT(cudaMemcpy(c.data(), dc, c.size() * 4, cudaMemcpyDeviceToHost));
    cudaFree(da);
    cudaFree(dw);
    cudaFree(dc);
    if (std::isnan(c[kM * kN])) {  // the wgmma kernel's marker (see wgmma_chain)
      std::fprintf(stderr,
                   "wgmma_bits: this build has no sm_90a code (CMAKE_CUDA_ARCHITECTURES)\n");
      return 1;
    }
    // Relative error of each result against the double reference, and bits vs mma.sync.
    double worst[2] = {0, 0};
    int differ[2] = {0, 0};
    for (int i = 0; i < kM; ++i) {
      for (int j = 0; j < kN; ++j) {
        double ref = 0, mag = 0;
        for (int kk = 0; kk < k; ++kk) {
          const double p = static_cast<double>(bf16_to_f32(a[static_cast<size_t>(i) * k + kk])) *
                           bf16_to_f32(w[static_cast<size_t>(j) * k + kk]);
          ref += p;
          mag += std::fabs(p);
        }
        for (int v = 0; v < 2; ++v) {
          const float got = c[v * kM * kN + i * kN + j];
          worst[v] = std::fmax(worst[v], std::isfinite(got) ? std::fabs(got - ref) / mag : 1e9);
          differ[v] += std::memcmp(&got, &c[i * kN + j], 4) != 0;
        }
      }
    }
    std::printf(
        "trial %d: max |err|/Σ|p|: mma.sync %.2e, wgmma %.2e; elements whose bits differ: %d of "
        "%d\n",
        trial, worst[0], worst[1], differ[1], kM * kN);
  }
  return 0;
}
