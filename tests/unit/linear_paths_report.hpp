#pragma once
// Test helper for the kernel tests: reports which paths a Linear runs, never asserts them.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "kernels/cpu/linear.hpp"

namespace muflow::kernels::cpu::testing_paths {

/// Reports (never asserts) which kernel paths `linear` uses: the type it computes in, the GEMM
/// (fixed-order or oneDNN tiles) and, for the tiles, whether the small-M fast path passed its construction probe. Both depend on the CPU's
/// ISA and the oneDNN build (e.g. no bf16 matmul, or a GEMV kernel with another reduction order
/// for one row); the invariants tested must hold whichever path runs. Printed as "[path] ..."
/// and recorded as a test property (in --gtest_output=xml) under `key`.
inline void report_linear_paths(const std::string& key, const Linear& linear) {
  const bool computes_bf16 = linear.weight_type() == LinearWeightType::kBF16;
  std::string paths = std::string("computes in ") + (computes_bf16 ? "bf16" : "f32");
  if (linear.kernel() == LinearKernel::kFixedOrder) {
    paths += ", fixed-order kernel (no tiles)";
  } else if (linear.small_m_path_enabled()) {
    const int64_t max_rows = computes_bf16 ? kLinearSmallMMaxRowsBF16 : kLinearSmallMMaxRowsF32;
    paths += ", small-M path enabled (remainders of <= " + std::to_string(max_rows) + " rows)";
  } else {
    paths += ", small-M path disabled (remainders run as padded tiles)";
  }
  std::printf("[path] %s: %s\n", key.c_str(), paths.c_str());
  testing::Test::RecordProperty(key, paths);
}

}  // namespace muflow::kernels::cpu::testing_paths
