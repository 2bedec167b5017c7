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
  const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  WeightMemory block(std::aligned_alloc(kHugePage, rounded));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (block) madvise(block.get(), rounded, MADV_HUGEPAGE);
#endif
  return block;
}

}  // namespace muflow::kernels::cpu
