#include "kernels/cpu/rope.hpp"

#include <cmath>
#include <vector>

#include "kernels/assert.hpp"

namespace muflow::kernels::cpu {

void rope_rotate_half(float* x, const int64_t* positions, int64_t num_rows, int64_t num_heads,
                      int64_t head_dim, float theta) {
  MUFLOW_ASSERT(num_rows >= 0 && num_heads > 0 && head_dim > 0, "rope: bad sizes");
  MUFLOW_ASSERT(head_dim % 2 == 0, "rope: head_dim must be even");
  const int64_t half = head_dim / 2;
  thread_local std::vector<double> inv_freq;
  thread_local std::vector<float> cos_table, sin_table;
  inv_freq.resize(static_cast<std::size_t>(half));
  cos_table.resize(static_cast<std::size_t>(half));
  sin_table.resize(static_cast<std::size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    inv_freq[i] = std::pow(static_cast<double>(theta),
                           -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  }
  for (int64_t r = 0; r < num_rows; ++r) {
    const double position = static_cast<double>(positions[r]);
    for (int64_t i = 0; i < half; ++i) {
      const double angle = position * inv_freq[i];
      cos_table[i] = static_cast<float>(std::cos(angle));
      sin_table[i] = static_cast<float>(std::sin(angle));
    }
    for (int64_t h = 0; h < num_heads; ++h) {
      float* head = x + (r * num_heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float a = head[i];
        const float b = head[i + half];
        head[i] = a * cos_table[i] - b * sin_table[i];
        head[i + half] = b * cos_table[i] + a * sin_table[i];
      }
    }
  }
}

}  // namespace muflow::kernels::cpu
