#include "kernels/reference/rms_norm.hpp"

#include <cmath>

namespace muflow::kernels::reference {

void rms_norm(const float* x, const float* weight, int64_t num_rows, int64_t dim, float eps,
              float* y) {
  for (int64_t r = 0; r < num_rows; ++r) {
    double sum_squares = 0.0;
    for (int64_t i = 0; i < dim; ++i) {
      sum_squares += static_cast<double>(x[r * dim + i]) * static_cast<double>(x[r * dim + i]);
    }
    const double inv_rms = 1.0 / std::sqrt(sum_squares / static_cast<double>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) {
      y[r * dim + i] = static_cast<float>(static_cast<double>(weight[i]) *
                                          static_cast<double>(x[r * dim + i]) * inv_rms);
    }
  }
}

}  // namespace muflow::kernels::reference
