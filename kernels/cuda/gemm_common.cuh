#pragma once
/// \file
/// Device helpers the bf16 GEMM kernels share (gemm.cu, gemm_sm90.cu): cp.async copies of
/// 16 bytes from global to shared memory (PTX ISA "cp.async"), the grouped launches' map from
/// a row tile to its group, and (host) the once-per-kernel-and-device shared-memory attributes.
/// Internal to kernels/cuda.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>
#include <set>
#include <utility>

#include "kernels/cuda/cuda_check.hpp"

namespace muflow::kernels::cuda {

/// Copies 16 bytes (both addresses 16-byte aligned), bypassing L1.
__device__ __forceinline__ void cp_async16(void* smem_dst, const void* gmem_src) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem_src));
}
/// As cp_async16, reading `src_bytes` (0 .. 16) bytes and filling the rest of the 16 with zeros.
__device__ __forceinline__ void cp_async16_zfill(void* smem_dst, const void* gmem_src,
                                                 int src_bytes) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src),
               "r"(src_bytes));
}
/// Closes this thread's cp.async copies issued since the last commit into one group.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
/// Waits until at most N of this thread's committed groups are still in flight (the writes of
/// the others are then visible to this thread; a barrier makes them visible to the others).
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/// The group of row tile `tile` of a grouped launch, `tile_start` being each group's first tile
/// (ascending, [num_groups]): the last group whose first tile is ≤ tile (empty groups own no
/// tile and are skipped by taking the last).
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

/// Dynamic shared memory above 48 KiB must be allowed once per kernel and device (the
/// instantiations share one function type, so the record is keyed by the kernel's address).
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
  // The whole unified L1/shared array as shared memory, for every kernel given here (they all
  // keep their operands in shared memory; L1 keeps what is left): so that, e.g., the decode
  // kernels' two or four blocks per SM fit (the driver's default split may leave room for one).
  MUFLOW_CUDA_ASSERT(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          cudaSharedmemCarveoutMaxShared));
  done.insert(key);
}

}  // namespace muflow::kernels::cuda
