#pragma once
/// \file
/// exp(x) in f32 with the same bits in a scalar, in 16 AVX-512 lanes and in 8 AVX2 lanes: the
/// kernels' own exponential (softmax in gqa_attention, SiLU in swiglu), so that a vector path
/// and the scalar form it must match agree bitwise (libm's expf has no vector twin).
///
/// Algorithm: x = n·ln 2 + r with n = round-to-nearest-even(x·log2 e) and ln 2 split in two
/// for the reduction (Cody–Waite); exp(r) ≈ 1 + r + r²·P(r) with P the degree-5 minimax
/// polynomial of Cephes' expf (S. L. Moshier, Cephes Math Library, expf.c); times 2^n.
/// Range: 0 below -87, +inf above 88 (exp(88) ≈ 1.65e38; libm gives finite values up to
/// 88.72 and subnormals down to -103.9, where every caller here adds 1 or normalises).
/// Relative error ≤ 2 ulp on [-87, 88] (kernel_fast_exp_test); exp(0) = 1 exactly. Every step
/// is one IEEE operation, fused multiply-adds where written so (muflow_kernels builds with
/// -ffp-contract=off, kernels/README.md), so the two forms give the same bits for every input
/// but NaN (a NaN input gives NaN in both).

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/cpu_features.hpp"

namespace muflow::kernels::cpu {

namespace fast_exp_constants {
inline constexpr float kMin = -87.0f;  ///< below: 0
inline constexpr float kMax = 88.0f;   ///< above: +inf
inline constexpr float kLog2e = 1.44269504088896341f;
/// ln 2 = kLn2Hi + kLn2Lo; kLn2Hi has few significant bits, so n·kLn2Hi is exact for |n| ≤ 127.
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                       kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;
}  // namespace fast_exp_constants

/// exp(x), scalar form. Any thread. NaN gives NaN.
inline float fast_exp(float x) {
  namespace k = fast_exp_constants;
  if (x < k::kMin) return 0.0f;
  if (x > k::kMax) return INFINITY;
  if (std::isnan(x)) return x;
  const float n = std::nearbyint(x * k::kLog2e);
  float r = std::fma(-n, k::kLn2Hi, x);
  r = std::fma(-n, k::kLn2Lo, r);
  float p = k::kP0;
  p = std::fma(p, r, k::kP1);
  p = std::fma(p, r, k::kP2);
  p = std::fma(p, r, k::kP3);
  p = std::fma(p, r, k::kP4);
  p = std::fma(p, r, k::kP5);
  const float r2 = r * r;
  const float e = std::fma(p, r2, r) + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float pow2;
  std::memcpy(&pow2, &bits, sizeof(pow2));
  return e * pow2;
}

/// fast_exp of 16 lanes (the same bits as fast_exp on each). Call only where the CPU has
/// AVX-512F (cpu_has_avx512f()), from a function compiled for it.
MUFLOW_TARGET_AVX512 inline __m512 fast_exp16(__m512 x) {
  namespace k = fast_exp_constants;
  const __mmask16 low = _mm512_cmp_ps_mask(x, _mm512_set1_ps(k::kMin), _CMP_LT_OQ);
  const __mmask16 high = _mm512_cmp_ps_mask(x, _mm512_set1_ps(k::kMax), _CMP_GT_OQ);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __m512 xc =
      _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(k::kMin)), _mm512_set1_ps(k::kMax));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(k::kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(k::kLn2Hi), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(k::kLn2Lo), r);
  __m512 p = _mm512_set1_ps(k::kP0);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(k::kP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(k::kP2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(k::kP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(k::kP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(k::kP5));
  const __m512 r2 = _mm512_mul_ps(r, r);
  const __m512 e = _mm512_add_ps(_mm512_fmadd_ps(p, r2, r), _mm512_set1_ps(1.0f));
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  __m512 out = _mm512_mul_ps(e, _mm512_castsi512_ps(bits));
  out = _mm512_mask_mov_ps(out, low, _mm512_setzero_ps());
  out = _mm512_mask_mov_ps(out, high, _mm512_set1_ps(INFINITY));
  return _mm512_mask_mov_ps(out, nan, x);
}

/// fast_exp of 8 lanes (the same bits as fast_exp on each). Call only where the CPU has AVX2
/// and FMA (cpu_has_avx2_fma()), from a function compiled for them.
MUFLOW_TARGET_AVX2 inline __m256 fast_exp8(__m256 x) {
  namespace k = fast_exp_constants;
  const __m256 low = _mm256_cmp_ps(x, _mm256_set1_ps(k::kMin), _CMP_LT_OQ);
  const __m256 high = _mm256_cmp_ps(x, _mm256_set1_ps(k::kMax), _CMP_GT_OQ);
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 xc =
      _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(k::kMin)), _mm256_set1_ps(k::kMax));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(k::kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(k::kLn2Hi), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(k::kLn2Lo), r);
  __m256 p = _mm256_set1_ps(k::kP0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(k::kP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(k::kP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(k::kP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(k::kP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(k::kP5));
  const __m256 r2 = _mm256_mul_ps(r, r);
  const __m256 e = _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), _mm256_set1_ps(1.0f));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 out = _mm256_mul_ps(e, _mm256_castsi256_ps(bits));
  out = _mm256_blendv_ps(out, _mm256_setzero_ps(), low);
  out = _mm256_blendv_ps(out, _mm256_set1_ps(INFINITY), high);
  return _mm256_blendv_ps(out, x, nan);
}

}  // namespace muflow::kernels::cpu
