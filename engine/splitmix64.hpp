#pragma once
/// \file
/// SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014) and the few distributions the workload generators need, written out so
/// that a seed gives the same requests on every compiler and standard library (the
/// std:: distributions are implementation-defined).

#include <cmath>
#include <cstdint>

namespace muflow::engine {

/// The splitmix64 output function applied to `z` + the golden-ratio increment: a bijective
/// 64-bit mix used for counter-based (stateless) random draws.
inline uint64_t splitmix64_mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A 64-bit PRNG with a 64-bit state. Value type; not thread-safe (one owner).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  /// Next 64 random bits.
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  /// Skips `n` draws: the state after them is the seed plus n increments (mod 2^64), so a
  /// generator can start at any draw of its sequence in O(1) (e.g. a workload's request k).
  void discard(uint64_t n) { state_ += n * 0x9E3779B97F4A7C15ull; }

  /// Uniform in [-1, 1): the top 24 bits mapped to a float grid of step 2^-23 (exact).
  float uniform_pm1() { return static_cast<float>(next() >> 40) * (1.0f / 8388608.0f) - 1.0f; }

  /// Uniform double in [0, 1) with 53 random bits.
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  /// Uniform integer in [lo, hi] (inclusive; requires lo <= hi) by multiply-high
  /// (Lemire 2019) without rejection: bias below range / 2^64, negligible here.
  int64_t uniform_int(int64_t lo, int64_t hi) {
    const unsigned __int128 range = static_cast<unsigned __int128>(hi - lo) + 1;
    return lo + static_cast<int64_t>((static_cast<unsigned __int128>(next()) * range) >> 64);
  }

  /// Exponential variate with the given mean, by inverse CDF: -mean * ln(1 - u).
  double exponential(double mean) { return -mean * std::log1p(-uniform01()); }

 private:
  uint64_t state_;
};

}  // namespace muflow::engine
