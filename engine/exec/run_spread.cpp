#include "engine/exec/run_spread.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/splitmix64.hpp"

namespace muflow::engine::exec {
namespace {

/// A uniform in (0, 1]: 53 bits of the mix of (seed, stream, k), never 0 (log below).
double open_uniform(uint64_t seed, uint64_t stream, uint64_t k) {
  const uint64_t h = splitmix64_mix(splitmix64_mix(splitmix64_mix(seed) ^ stream) ^ k);
  return (static_cast<double>(h >> 11) + 1.0) * 0x1.0p-53;
}

}  // namespace

double run_spread_factor(uint64_t seed, uint64_t stream, uint64_t n, double sigma) {
  if (!(sigma > 0) || !std::isfinite(sigma)) return 1.0;
  const double u1 = open_uniform(seed, stream, 2 * n);
  const double u2 = open_uniform(seed, stream, 2 * n + 1);
  const double z =
      std::clamp(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2),
                 -kRunSpreadMaxZ, kRunSpreadMaxZ);
  return std::exp(sigma * z - 0.5 * sigma * sigma);
}

}  // namespace muflow::engine::exec
