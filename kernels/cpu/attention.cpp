#include "kernels/cpu/attention.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/assert.hpp"
#include "kernels/cpu/avx2_lanes.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/fast_exp.hpp"

namespace muflow::kernels::cpu {
namespace {

/// Lanes of every sum (one AVX-512 vector of floats).
constexpr int64_t kLanes = 16;
/// Largest head_dim the vector path takes (its query and output rows as 32 vectors each, on
/// the stack); larger ones run the scalar form.
constexpr int64_t kMaxVectorHeadDim = 512;

/// The halving tree over 16 lanes: lane i + lane i+8, then i + i+4, i + i+2, i + i+1.
float tree_sum(const float* lanes) {
  float y[8], z[4], w[2];
  for (int i = 0; i < 8; ++i) y[i] = lanes[i] + lanes[i + 8];
  for (int i = 0; i < 4; ++i) z[i] = y[i] + y[i + 4];
  for (int i = 0; i < 2; ++i) w[i] = z[i] + z[i + 2];
  return w[0] + w[1];
}

/// Score buffer of this thread, at least `n` floats rounded up to whole vectors.
float* score_buffer(int64_t n) {
  thread_local std::vector<float> scores;
  const auto want = static_cast<std::size_t>((n + kLanes - 1) / kLanes * kLanes);
  if (scores.size() < want) scores.resize(want);
  return scores.data();
}

void check_sizes(int64_t ctx_len, int64_t num_heads, int64_t num_kv_heads, int64_t head_dim) {
  MUFLOW_ASSERT(ctx_len > 0, "gqa_attention: ctx_len must be >= 1 (the token's own K/V)");
  MUFLOW_ASSERT(num_heads > 0 && num_kv_heads > 0 && head_dim > 0, "gqa_attention: bad sizes");
  MUFLOW_ASSERT(num_heads % num_kv_heads == 0,
                "gqa_attention: num_heads must be a multiple of num_kv_heads");
}

// ---- AVX-512F: the same operations, 16 lanes at a time ------------------------------------

/// tree_sum of 16 vectors at once: lane j of the result is tree_sum(a[j]).
MUFLOW_TARGET_AVX512 __m512 tree_sum16(const __m512* a) {
  __m512 s1[8], s2[4], s3[2];
  // Halves of a[j] and a[j+8] side by side: lanes 0-7 = a[j]'s i + i+8, 8-15 = a[j+8]'s.
  for (int j = 0; j < 8; ++j) {
    s1[j] = _mm512_add_ps(_mm512_shuffle_f32x4(a[j], a[j + 8], 0x44),
                          _mm512_shuffle_f32x4(a[j], a[j + 8], 0xEE));
  }
  // 128-bit blocks: [z of j, z of j+8, z of j+4, z of j+12] (i + i+4 within each half).
  for (int j = 0; j < 4; ++j) {
    s2[j] = _mm512_add_ps(_mm512_shuffle_f32x4(s1[j], s1[j + 4], 0x88),
                          _mm512_shuffle_f32x4(s1[j], s1[j + 4], 0xDD));
  }
  // Within each block: [w0, w1 of s2[j]'s, w0, w1 of s2[j+2]'s] (i + i+2).
  for (int j = 0; j < 2; ++j) {
    s3[j] = _mm512_add_ps(_mm512_shuffle_ps(s2[j], s2[j + 2], 0x44),
                          _mm512_shuffle_ps(s2[j], s2[j + 2], 0xEE));
  }
  // i + i+1: lanes now hold the sums of a[0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15].
  const __m512 s4 =
      _mm512_add_ps(_mm512_shuffle_ps(s3[0], s3[1], 0x88), _mm512_shuffle_ps(s3[0], s3[1], 0xDD));
  const __m512i order = _mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15);
  return _mm512_permutexvar_ps(order, s4);
}

MUFLOW_TARGET_AVX512 void attention_avx512(const float* q, const float* k_cache,
                                           const float* v_cache, int64_t ctx_len, int64_t num_heads,
                                           int64_t num_kv_heads, int64_t head_dim, float* out) {
  const int64_t group = num_heads / num_kv_heads;
  const int64_t kv_stride = num_kv_heads * head_dim;  // floats between two positions
  const int64_t chunks = (head_dim + kLanes - 1) / kLanes;
  const auto last_mask =
      static_cast<__mmask16>(head_dim % kLanes == 0 ? 0xFFFF : (1u << (head_dim % kLanes)) - 1);
  const __m512 scale = _mm512_set1_ps(1.0f / std::sqrt(static_cast<float>(head_dim)));
  float* scores = score_buffer(ctx_len);
  __m512 qv[kMaxVectorHeadDim / kLanes], acc[kMaxVectorHeadDim / kLanes];

  for (int64_t h = 0; h < num_heads; ++h) {
    const float* k_head = k_cache + (h / group) * head_dim;
    const float* v_head = v_cache + (h / group) * head_dim;
    for (int64_t c = 0; c < chunks; ++c) {
      qv[c] = _mm512_maskz_loadu_ps(c + 1 == chunks ? last_mask : 0xFFFF,
                                    q + h * head_dim + c * kLanes);
    }
    // Scores of 16 positions at a time (positions past the context are zeros, not stored).
    __m512 max16 = _mm512_set1_ps(-INFINITY);
    for (int64_t t0 = 0; t0 < ctx_len; t0 += kLanes) {
      const int64_t count = std::min(kLanes, ctx_len - t0);
      __m512 dots[kLanes];
      for (int64_t j = 0; j < kLanes; ++j) {
        __m512 d = _mm512_setzero_ps();
        if (j < count) {
          const float* k_row = k_head + (t0 + j) * kv_stride;
          for (int64_t c = 0; c < chunks; ++c) {
            d = _mm512_fmadd_ps(
                qv[c],
                _mm512_maskz_loadu_ps(c + 1 == chunks ? last_mask : 0xFFFF, k_row + c * kLanes), d);
          }
        }
        dots[j] = d;
      }
      const auto valid = static_cast<__mmask16>(count == kLanes ? 0xFFFF : (1u << count) - 1);
      const __m512 s = _mm512_mul_ps(tree_sum16(dots), scale);
      _mm512_mask_storeu_ps(scores + t0, valid, s);
      max16 = _mm512_mask_max_ps(max16, valid, max16, s);
    }
    const __m512 max_score = _mm512_set1_ps(_mm512_reduce_max_ps(max16));
    // Softmax numerators in place; the denominator in 16 lanes (lane l: positions l, l+16, ...).
    __m512 denominator16 = _mm512_setzero_ps();
    for (int64_t t0 = 0; t0 < ctx_len; t0 += kLanes) {
      const int64_t count = std::min(kLanes, ctx_len - t0);
      const auto valid = static_cast<__mmask16>(count == kLanes ? 0xFFFF : (1u << count) - 1);
      const __m512 p =
          fast_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(valid, scores + t0), max_score));
      _mm512_mask_storeu_ps(scores + t0, valid, p);
      denominator16 = _mm512_mask_add_ps(denominator16, valid, denominator16, p);
    }
    alignas(64) float lanes[kLanes];
    _mm512_store_ps(lanes, denominator16);
    const __m512 inv_denominator = _mm512_set1_ps(1.0f / tree_sum(lanes));
    // out = Σ_t p_t v_t in position order, then / denominator.
    for (int64_t c = 0; c < chunks; ++c) acc[c] = _mm512_setzero_ps();
    for (int64_t t = 0; t < ctx_len; ++t) {
      const __m512 p = _mm512_set1_ps(scores[t]);
      const float* v_row = v_head + t * kv_stride;
      for (int64_t c = 0; c < chunks; ++c) {
        acc[c] = _mm512_fmadd_ps(
            p, _mm512_maskz_loadu_ps(c + 1 == chunks ? last_mask : 0xFFFF, v_row + c * kLanes),
            acc[c]);
      }
    }
    float* out_head = out + h * head_dim;
    for (int64_t c = 0; c < chunks; ++c) {
      _mm512_mask_storeu_ps(out_head + c * kLanes, c + 1 == chunks ? last_mask : 0xFFFF,
                            _mm512_mul_ps(acc[c], inv_denominator));
    }
  }
}

// ---- AVX2 + FMA: the same operations, each 16-lane sum as two 8-float halves --------------

/// tree_sum of the 16 lanes lo (0-7) and hi (8-15): lane i + lane i+8 is one vector add, then
/// i + i+4, i + i+2 and i + i+1 within it, as tree_sum.
MUFLOW_TARGET_AVX2 float tree_sum_halves(__m256 lo, __m256 hi) {
  const __m256 y = _mm256_add_ps(lo, hi);
  const __m128 z = _mm_add_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1));
  const __m128 w = _mm_add_ps(z, _mm_movehl_ps(z, z));
  return _mm_cvtss_f32(_mm_add_ss(w, _mm_shuffle_ps(w, w, 0x55)));
}

/// 8 floats of p[0, count) (zeros past count), count ∈ [0, 8].
MUFLOW_TARGET_AVX2 __m256 load_first(const float* p, int64_t count) {
  return count >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, avx2_lanes_below(count));
}

MUFLOW_TARGET_AVX2 void attention_avx2(const float* q, const float* k_cache, const float* v_cache,
                                       int64_t ctx_len, int64_t num_heads, int64_t num_kv_heads,
                                       int64_t head_dim, float* out) {
  constexpr int64_t kHalf = 8;
  const int64_t group = num_heads / num_kv_heads;
  const int64_t kv_stride = num_kv_heads * head_dim;  // floats between two positions
  const int64_t halves = (head_dim + kHalf - 1) / kHalf;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  float* scores = score_buffer(ctx_len);
  __m256 qv[kMaxVectorHeadDim / kHalf], acc[kMaxVectorHeadDim / kHalf];
  // Dimensions of half c: [8c, 8c + width(c)); lane l of half c sums dimension 8c + l, which
  // is lane (8c + l) mod 16 of the 16-lane sums: even halves feed lanes 0-7, odd ones 8-15.
  auto width = [&](int64_t c) { return std::min(kHalf, head_dim - c * kHalf); };

  for (int64_t h = 0; h < num_heads; ++h) {
    const float* k_head = k_cache + (h / group) * head_dim;
    const float* v_head = v_cache + (h / group) * head_dim;
    for (int64_t c = 0; c < halves; ++c) qv[c] = load_first(q + h * head_dim + c * kHalf, width(c));
    float max_score = -INFINITY;
    for (int64_t t = 0; t < ctx_len; ++t) {
      const float* k_row = k_head + t * kv_stride;
      __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
      for (int64_t c = 0; c < halves; c += 2) {
        lo = _mm256_fmadd_ps(qv[c], load_first(k_row + c * kHalf, width(c)), lo);
        if (c + 1 < halves) {
          hi = _mm256_fmadd_ps(qv[c + 1], load_first(k_row + (c + 1) * kHalf, width(c + 1)), hi);
        }
      }
      scores[t] = tree_sum_halves(lo, hi) * scale;
      max_score = std::max(max_score, scores[t]);
    }
    // Softmax numerators in place; the denominator's lane l sums positions l, l+16, ...
    const __m256 max_v = _mm256_set1_ps(max_score);
    __m256 den_lo = _mm256_setzero_ps(), den_hi = _mm256_setzero_ps();
    for (int64_t t0 = 0; t0 < ctx_len; t0 += 2 * kHalf) {
      const int64_t count_lo = std::min(kHalf, ctx_len - t0);
      const __m256i valid_lo = avx2_lanes_below(count_lo);
      const __m256 p_lo = fast_exp8(_mm256_sub_ps(load_first(scores + t0, count_lo), max_v));
      _mm256_maskstore_ps(scores + t0, valid_lo, p_lo);
      den_lo = _mm256_blendv_ps(den_lo, _mm256_add_ps(den_lo, p_lo), _mm256_castsi256_ps(valid_lo));
      const int64_t count_hi = std::clamp<int64_t>(ctx_len - t0 - kHalf, 0, kHalf);
      if (count_hi > 0) {
        const __m256i valid_hi = avx2_lanes_below(count_hi);
        const __m256 p_hi =
            fast_exp8(_mm256_sub_ps(load_first(scores + t0 + kHalf, count_hi), max_v));
        _mm256_maskstore_ps(scores + t0 + kHalf, valid_hi, p_hi);
        den_hi =
            _mm256_blendv_ps(den_hi, _mm256_add_ps(den_hi, p_hi), _mm256_castsi256_ps(valid_hi));
      }
    }
    const __m256 inv_denominator = _mm256_set1_ps(1.0f / tree_sum_halves(den_lo, den_hi));
    // out = Σ_t p_t v_t in position order, then / denominator.
    for (int64_t c = 0; c < halves; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t t = 0; t < ctx_len; ++t) {
      const __m256 p = _mm256_set1_ps(scores[t]);
      const float* v_row = v_head + t * kv_stride;
      for (int64_t c = 0; c < halves; ++c) {
        acc[c] = _mm256_fmadd_ps(p, load_first(v_row + c * kHalf, width(c)), acc[c]);
      }
    }
    float* out_head = out + h * head_dim;
    for (int64_t c = 0; c < halves; ++c) {
      const __m256 o = _mm256_mul_ps(acc[c], inv_denominator);
      if (width(c) == kHalf) {
        _mm256_storeu_ps(out_head + c * kHalf, o);
      } else {
        _mm256_maskstore_ps(out_head + c * kHalf, avx2_lanes_below(width(c)), o);
      }
    }
  }
}

// The scalar form, one lane at a time; compiled twice below.
[[gnu::always_inline]] inline void attention_scalar(const float* q, const float* k_cache,
                                                    const float* v_cache, int64_t ctx_len,
                                                    int64_t num_heads, int64_t num_kv_heads,
                                                    int64_t head_dim, float* out) {
  check_sizes(ctx_len, num_heads, num_kv_heads, head_dim);
  const int64_t group = num_heads / num_kv_heads;
  const int64_t kv_stride = num_kv_heads * head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  float* scores = score_buffer(ctx_len);
  for (int64_t h = 0; h < num_heads; ++h) {
    const float* q_head = q + h * head_dim;
    const float* k_head = k_cache + (h / group) * head_dim;
    const float* v_head = v_cache + (h / group) * head_dim;
    float max_score = -INFINITY;
    for (int64_t t = 0; t < ctx_len; ++t) {
      const float* k_row = k_head + t * kv_stride;
      float lanes[kLanes] = {};
      for (int64_t d = 0; d < head_dim; ++d) {
        lanes[d % kLanes] = std::fma(q_head[d], k_row[d], lanes[d % kLanes]);
      }
      scores[t] = tree_sum(lanes) * scale;
      max_score = std::max(max_score, scores[t]);
    }
    float lanes[kLanes] = {};
    for (int64_t t = 0; t < ctx_len; ++t) {
      scores[t] = fast_exp(scores[t] - max_score);
      lanes[t % kLanes] += scores[t];
    }
    const float inv_denominator = 1.0f / tree_sum(lanes);
    float* out_head = out + h * head_dim;
    std::fill(out_head, out_head + head_dim, 0.0f);
    for (int64_t t = 0; t < ctx_len; ++t) {
      const float* v_row = v_head + t * kv_stride;
      for (int64_t d = 0; d < head_dim; ++d)
        out_head[d] = std::fma(scores[t], v_row[d], out_head[d]);
    }
    for (int64_t d = 0; d < head_dim; ++d) out_head[d] *= inv_denominator;
  }
}

// std::fma and fast_exp's std::nearbyint as instructions (vfmadd, roundss).
MUFLOW_TARGET_AVX2 void attention_scalar_fma(const float* q, const float* k_cache,
                                             const float* v_cache, int64_t ctx_len,
                                             int64_t num_heads, int64_t num_kv_heads,
                                             int64_t head_dim, float* out) {
  attention_scalar(q, k_cache, v_cache, ctx_len, num_heads, num_kv_heads, head_dim, out);
}

// The same as library calls (baseline x86-64 has neither instruction).
void attention_scalar_baseline(const float* q, const float* k_cache, const float* v_cache,
                               int64_t ctx_len, int64_t num_heads, int64_t num_kv_heads,
                               int64_t head_dim, float* out) {
  attention_scalar(q, k_cache, v_cache, ctx_len, num_heads, num_kv_heads, head_dim, out);
}

}  // namespace

// Hardware FMA and rounding where the CPU has them, the same bits either way; chosen by a
// CPUID test rather than an ifunc (see swiglu_row in expert_ffn.cpp).
void gqa_attention_generic(const float* q, const float* k_cache, const float* v_cache,
                           int64_t ctx_len, int64_t num_heads, int64_t num_kv_heads,
                           int64_t head_dim, float* out) {
  if (cpu_has_avx2_fma()) {
    attention_scalar_fma(q, k_cache, v_cache, ctx_len, num_heads, num_kv_heads, head_dim, out);
  } else {
    attention_scalar_baseline(q, k_cache, v_cache, ctx_len, num_heads, num_kv_heads, head_dim, out);
  }
}

void gqa_attention(const float* q, const float* k_cache, const float* v_cache, int64_t ctx_len,
                   int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float* out,
                   std::optional<VectorIsa> isa) {
  if (!isa) isa = widest_vector_isa();
  MUFLOW_ASSERT(!isa || cpu_has_isa(*isa), "gqa_attention: the CPU lacks the ISA asked for");
  if (!isa || head_dim > kMaxVectorHeadDim) {
    return gqa_attention_generic(q, k_cache, v_cache, ctx_len, num_heads, num_kv_heads, head_dim,
                                 out);
  }
  check_sizes(ctx_len, num_heads, num_kv_heads, head_dim);
  if (*isa == VectorIsa::kAvx512) {
    attention_avx512(q, k_cache, v_cache, ctx_len, num_heads, num_kv_heads, head_dim, out);
  } else {
    attention_avx2(q, k_cache, v_cache, ctx_len, num_heads, num_kv_heads, head_dim, out);
  }
}

}  // namespace muflow::kernels::cpu
