#include "kernels/cpu/weight_memory.hpp"

#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace muflow::kernels::cpu {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

}  // namespace

void WeightMemoryDeleter::operator()(void* p) const { std::free(p); }

WeightMemory allocate_weights(std::size_t bytes) {
  if (bytes < kHugePage) return WeightMemory(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  void* block = nullptr;
  if (posix_memalign(&block, kHugePage, bytes) != 0) return WeightMemory();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Only whole 2 MiB pages inside the block: the range advised belongs to it alone.
  madvise(block, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
#endif
  return WeightMemory(block);
}

}  // namespace muflow::kernels::cpu
