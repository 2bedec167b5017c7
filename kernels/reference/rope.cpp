#include "kernels/reference/rope.hpp"

#include <cmath>
#include <vector>

namespace muflow::kernels::reference {

void rope_rotate_half(float* x, const int64_t* positions, int64_t num_rows, int64_t num_heads,
                      int64_t head_dim, float theta) {
  const int64_t half = head_dim / 2;
  std::vector<double> rotated(static_cast<std::size_t>(head_dim));
  for (int64_t r = 0; r < num_rows; ++r) {
    for (int64_t h = 0; h < num_heads; ++h) {
      float* v = x + (r * num_heads + h) * head_dim;
      for (int64_t j = 0; j < head_dim; ++j) {
        const int64_t i = j % half;  // HF repeats the half-size frequency table twice
        const double angle = static_cast<double>(positions[r]) *
                             std::pow(static_cast<double>(theta),
                                      -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
        const double rotate_half = j < half ? -static_cast<double>(v[j + half])
                                            : static_cast<double>(v[j - half]);
        rotated[j] = static_cast<double>(v[j]) * std::cos(angle) + rotate_half * std::sin(angle);
      }
      for (int64_t j = 0; j < head_dim; ++j) v[j] = static_cast<float>(rotated[j]);
    }
  }
}

}  // namespace muflow::kernels::reference
