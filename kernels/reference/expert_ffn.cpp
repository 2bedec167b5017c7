#include "kernels/reference/expert_ffn.hpp"

#include <cmath>
#include <vector>

#include "kernels/cpu/bf16.hpp"

namespace muflow::kernels::reference {
namespace {

double silu(double z) { return z / (1.0 + std::exp(-z)); }

/// Shared body: `load_w(matrix, index)` reads one weight as double, `round_x` maps an f32
/// activation to what the matmul sees.
template <typename W, typename LoadW, typename RoundX>
void expert_ffn_impl(const float* x, const W* gate, const W* up, const W* down,
                     int64_t num_rows, int64_t hidden, int64_t ffn, float* y, LoadW load_w,
                     RoundX round_x) {
  std::vector<double> activation(static_cast<std::size_t>(ffn));
  for (int64_t r = 0; r < num_rows; ++r) {
    const float* row = x + r * hidden;
    for (int64_t j = 0; j < ffn; ++j) {
      double g = 0.0, u = 0.0;
      for (int64_t k = 0; k < hidden; ++k) {
        const double xv = round_x(row[k]);
        g += xv * load_w(gate, j * hidden + k);
        u += xv * load_w(up, j * hidden + k);
      }
      activation[j] = round_x(static_cast<float>(silu(g) * u));
    }
    for (int64_t n = 0; n < hidden; ++n) {
      double sum = 0.0;
      for (int64_t j = 0; j < ffn; ++j) sum += activation[j] * load_w(down, n * ffn + j);
      y[r * hidden + n] = static_cast<float>(sum);
    }
  }
}

}  // namespace

void swiglu(const float* gate_up, int64_t num_rows, int64_t ffn, float* out) {
  for (int64_t r = 0; r < num_rows; ++r) {
    for (int64_t j = 0; j < ffn; ++j) {
      const double g = gate_up[r * 2 * ffn + j];
      const double u = gate_up[r * 2 * ffn + ffn + j];
      out[r * ffn + j] = static_cast<float>(silu(g) * u);
    }
  }
}

void expert_ffn(const float* x, const float* gate, const float* up, const float* down,
                int64_t num_rows, int64_t hidden, int64_t ffn, float* y) {
  expert_ffn_impl(
      x, gate, up, down, num_rows, hidden, ffn, y,
      [](const float* w, int64_t i) { return static_cast<double>(w[i]); },
      [](float v) { return static_cast<double>(v); });
}

void expert_ffn_bf16(const float* x, const uint16_t* gate, const uint16_t* up,
                     const uint16_t* down, int64_t num_rows, int64_t hidden, int64_t ffn,
                     float* y) {
  expert_ffn_impl(
      x, gate, up, down, num_rows, hidden, ffn, y,
      [](const uint16_t* w, int64_t i) { return static_cast<double>(cpu::bf16_to_f32(w[i])); },
      [](float v) { return static_cast<double>(cpu::bf16_to_f32(cpu::f32_to_bf16(v))); });
}

}  // namespace muflow::kernels::reference
