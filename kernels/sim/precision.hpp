#pragma once
/// \file
/// Numeric precision of a simulated GEMM-heavy op: which peak FLOP/s of a device kind applies
/// and how many bytes one weight or activation element takes. Plain value, no state.

#include <cstdint>
#include <string_view>

namespace muflow::kernels::sim {

/// The math mode of an op. `kF32` runs on the non-tensor FP32 pipes; `kTF32`, `kF16` and
/// `kBF16` are dense tensor-core modes (on devices without them, see `DeviceKind::peak_flops`).
enum class Precision { kF32, kTF32, kF16, kBF16 };

/// Bytes per stored element: 4 for f32 and tf32 (tf32 is a math mode over f32 storage),
/// 2 for f16 and bf16.
constexpr int64_t precision_bytes(Precision p) {
  return (p == Precision::kF16 || p == Precision::kBF16) ? 2 : 4;
}

/// "f32", "tf32", "f16", "bf16" (the names `parse_precision` accepts).
constexpr std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::kF32:
      return "f32";
    case Precision::kTF32:
      return "tf32";
    case Precision::kF16:
      return "f16";
    case Precision::kBF16:
      return "bf16";
  }
  return "?";
}

}  // namespace muflow::kernels::sim
