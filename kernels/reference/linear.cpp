#include "kernels/reference/linear.hpp"

#include "kernels/cpu/bf16.hpp"

namespace muflow::kernels::reference {

void linear(const float* x, const float* weight, const float* bias, int64_t num_rows,
            int64_t out_features, int64_t in_features, float* y) {
  for (int64_t m = 0; m < num_rows; ++m) {
    for (int64_t n = 0; n < out_features; ++n) {
      double sum = bias != nullptr ? static_cast<double>(bias[n]) : 0.0;
      for (int64_t k = 0; k < in_features; ++k) {
        sum += static_cast<double>(x[m * in_features + k]) *
               static_cast<double>(weight[n * in_features + k]);
      }
      y[m * out_features + n] = static_cast<float>(sum);
    }
  }
}

void linear_bf16(const float* x, const uint16_t* weight, const float* bias, int64_t num_rows,
                 int64_t out_features, int64_t in_features, float* y) {
  using cpu::bf16_to_f32;
  using cpu::f32_to_bf16;
  for (int64_t m = 0; m < num_rows; ++m) {
    for (int64_t n = 0; n < out_features; ++n) {
      double sum = bias != nullptr ? static_cast<double>(bias[n]) : 0.0;
      for (int64_t k = 0; k < in_features; ++k) {
        const double xv = bf16_to_f32(f32_to_bf16(x[m * in_features + k]));
        sum += xv * static_cast<double>(bf16_to_f32(weight[n * in_features + k]));
      }
      y[m * out_features + n] = static_cast<float>(sum);
    }
  }
}

}  // namespace muflow::kernels::reference
