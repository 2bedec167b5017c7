#pragma once
/// \file
/// Memory for packed weights: 64-byte aligned, and backed by 2 MiB transparent huge pages
/// where the kernel allows it. A decode step streams every weight it uses once (~130 MB per
/// token for a 0.2 B-parameter bf16 MoE); with 4 KiB pages that is one TLB miss per 4 KiB,
/// with huge pages one per 2 MiB.

#include <cstddef>
#include <memory>

namespace muflow::kernels::cpu {

/// Frees what allocate_weights returned.
struct WeightMemoryDeleter {
  void operator()(void* p) const;
};
using WeightMemory = std::unique_ptr<void, WeightMemoryDeleter>;

/// `bytes` (> 0) of uninitialised memory, 64-byte aligned. From 2 MiB on, the block is
/// 2 MiB aligned (no padding: the alignment costs address space, not memory) and, on Linux,
/// the whole 2 MiB pages inside it are advised MADV_HUGEPAGE, so pages faulted in when it is
/// first written are huge pages where /sys/kernel/mm/transparent_hugepage/enabled is `always`
/// or `madvise`. Pages the allocator hands back already faulted in (memory it reuses) stay
/// 4 KiB until the kernel's khugepaged collapses them; the tail under 2 MiB keeps 4 KiB pages.
/// A refused advice is ignored (the memory works either way). Null when out of memory. Any
/// thread.
WeightMemory allocate_weights(std::size_t bytes);

}  // namespace muflow::kernels::cpu
