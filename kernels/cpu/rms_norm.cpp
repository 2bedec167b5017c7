#include "kernels/cpu/rms_norm.hpp"

#include <cmath>

#include "kernels/assert.hpp"

namespace muflow::kernels::cpu {

void rms_norm(const float* x, const float* weight, int64_t num_rows, int64_t dim, float eps,
              float* y) {
  MUFLOW_ASSERT(num_rows >= 0 && dim > 0, "rms_norm: bad sizes");
  for (int64_t r = 0; r < num_rows; ++r) {
    const float* row_x = x + r * dim;
    float* row_y = y + r * dim;
    // Sum of squares in index order, in double (one fixed order per row: batch invariant).
    double sum_squares = 0.0;
    for (int64_t i = 0; i < dim; ++i) {
      const double v = row_x[i];
      sum_squares += v * v;
    }
    // As HF: variance in f32, x * rsqrt(variance + eps), then weight * that.
    const float variance = static_cast<float>(sum_squares / static_cast<double>(dim));
    const float inv_rms = 1.0f / std::sqrt(variance + eps);
    for (int64_t i = 0; i < dim; ++i) row_y[i] = weight[i] * (row_x[i] * inv_rms);
  }
}

}  // namespace muflow::kernels::cpu
