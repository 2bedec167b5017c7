#pragma once
/// \file
/// Seeded random inputs for kernel tests and benchmarks (header-only, no dependencies).
/// The generator is our own splitmix64 so the values are the same on every standard library.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/cpu/bf16.hpp"

namespace muflow::kernels::reference {

/// The seed a test uses: `MUFLOW_TEST_SEED` from the environment when set (decimal), else
/// `default_seed`. Prints "[seed] <what>: <seed>" to stdout so a failure can be replayed.
inline uint64_t test_seed(const char* what, uint64_t default_seed) {
  uint64_t seed = default_seed;
  if (const char* env = std::getenv("MUFLOW_TEST_SEED"); env != nullptr && *env != '\0') {
    seed = std::strtoull(env, nullptr, 10);
  }
  std::printf("[seed] %s: %llu (override with MUFLOW_TEST_SEED)\n", what,
              static_cast<unsigned long long>(seed));
  return seed;
}

/// splitmix64 (Steele, Lea, Flood 2014): a tiny, fully specified 64-bit generator.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [lo, hi) with 24 random bits.
  float uniform(float lo, float hi) {
    const float unit = static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * unit;
  }

 private:
  uint64_t state_;
};

/// `num_values` floats uniform in [lo, hi).
inline std::vector<float> random_floats(SplitMix64& rng, int64_t num_values, float lo,
                                        float hi) {
  std::vector<float> values(static_cast<std::size_t>(num_values));
  for (float& v : values) v = rng.uniform(lo, hi);
  return values;
}

/// `num_values` bf16 bits of values uniform in [lo, hi), rounded to nearest-even.
inline std::vector<uint16_t> random_bf16(SplitMix64& rng, int64_t num_values, float lo,
                                         float hi) {
  std::vector<uint16_t> values(static_cast<std::size_t>(num_values));
  for (uint16_t& v : values) v = cpu::f32_to_bf16(rng.uniform(lo, hi));
  return values;
}

}  // namespace muflow::kernels::reference
