#pragma once
/// \file
/// The lane mask of the AVX2 paths' partial vectors (maskload / maskstore of the first lanes),
/// shared by the fixed-order GEMM, attention and swiglu.

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/cpu_features.hpp"

namespace muflow::kernels::cpu {

/// Lanes [0, count) of 8 set (all bits of each 32-bit lane), count ∈ [0, 8] (not checked:
/// below 0 gives none, above 8 all). Call only from a function compiled for AVX2
/// (MUFLOW_TARGET_AVX2) on a CPU that has it. Any thread.
MUFLOW_TARGET_AVX2 inline __m256i avx2_lanes_below(int64_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

}  // namespace muflow::kernels::cpu
