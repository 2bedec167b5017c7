// Tests for kernels/cpu/weight_memory.hpp: alignment, size rounding and usable memory (whether
// the OS grants huge pages is its setting, not the allocator's behaviour, so it is not asserted).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/weight_memory.hpp"

namespace muflow::kernels::cpu {
namespace {

TEST(WeightMemoryTest, SmallBlocksAre64ByteAlignedAndLargeOnes2MiBAligned) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  for (std::size_t bytes : {std::size_t{1}, std::size_t{100}, 2 * kMiB - 1}) {
    WeightMemory m = allocate_weights(bytes);
    ASSERT_NE(m, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(m.get()) % 64, 0u) << bytes;
    std::memset(m.get(), 0xAB, bytes);
  }
  for (std::size_t bytes : {2 * kMiB, 2 * kMiB + 1, 7 * kMiB + 3}) {
    WeightMemory m = allocate_weights(bytes);
    ASSERT_NE(m, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(m.get()) % (2 * kMiB), 0u) << bytes;
    // Every byte asked for is writable and keeps its value.
    auto* p = static_cast<unsigned char*>(m.get());
    for (std::size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(i * 7);
    for (std::size_t i = 0; i < bytes; i += 4093) {
      ASSERT_EQ(p[i], static_cast<unsigned char>(i * 7)) << i;
    }
  }
}

}  // namespace
}  // namespace muflow::kernels::cpu
