#include "engine/exec/run_spread.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/serving/sampling.hpp"

namespace muflow::engine::exec {

double run_spread_factor(uint64_t seed, uint64_t stream, uint64_t n, double sigma) {
  if (!(sigma > 0) || !std::isfinite(sigma)) return 1.0;
  // Two uniforms in (0, 1] (1 − [0, 1): the log below never sees 0).
  const double u1 = 1.0 - serving::counter_uniform(seed, stream, 2 * n);
  const double u2 = 1.0 - serving::counter_uniform(seed, stream, 2 * n + 1);
  const double z =
      std::clamp(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2),
                 -kRunSpreadMaxZ, kRunSpreadMaxZ);
  return std::exp(sigma * z - 0.5 * sigma * sigma);
}

}  // namespace muflow::engine::exec
