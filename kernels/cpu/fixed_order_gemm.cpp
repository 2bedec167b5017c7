#include "kernels/cpu/fixed_order_gemm.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

#include "kernels/assert.hpp"
#include "kernels/cpu/avx2_lanes.hpp"
#include "kernels/cpu/cpu_features.hpp"

// The kernels are compiled for AVX-512 or AVX2 per function (target attributes), never for
// the whole file, so nothing else here can pick up an instruction an older CPU lacks; callers
// check fixed_order_gemm_*_available() first.

namespace muflow::kernels::cpu {
namespace {

constexpr int kRows = 6;    // rows per register block (6 × 4 accumulators = 24 zmm)
constexpr int kLanes = 16;  // f32 per zmm
constexpr int kMaxVecs = static_cast<int>(kFixedOrderPanel / kLanes);  // 4
/// bf16 reduction depth per pass: 512 k (256 pairs) × 64 columns × 2 B = 64 KiB, in L2
/// (measured 6–9 % faster than 256 at M = 128 and 512; 1024 gave the same as 512).
constexpr int64_t kKBlockBf16 = 512;
/// Rows per outer block: the x slice of a pass (rows × k-block) stays in L2 while every panel
/// of the block reads it. A multiple of kRows.
constexpr int64_t kRowBlock = 240;
/// A GEMM's work in multiply-add equivalents: (rows + kWeightCost) × n × k. Reading one
/// weight from DRAM (≈ 30 GB/s per core) takes about as long as 16 multiply-adds (≈ 200 GFLOP/s),
/// so decode-sized calls, bound by their weights, count their weights too.
constexpr int64_t kWeightCost = 16;
/// Work per extra GEMM thread: about 10 µs.
constexpr int64_t kMinWorkPerThread = int64_t{1} << 20;
/// Software prefetch distance in reduction steps (rows of a panel slice): 16 × 256 B = 4 KiB
/// ahead for a 64-column f32 panel.
constexpr int64_t kPrefetchSteps = 16;
/// Panels per group when many rows sweep k-blocks (see sweep_panels): 240 rows × 256 columns of
/// partial sums = 240 KiB.
constexpr int64_t kPanelGroup = 4;
/// Up to this many rows a call finishes each panel before the next (see sweep_panels).
constexpr int64_t kPanelMajorRows = 48;

int64_t num_panels(int64_t padded_n) {
  return (padded_n + kFixedOrderPanel - 1) / kFixedOrderPanel;
}

int64_t panel_width(int64_t padded_n, int64_t panel) {
  return std::min(kFixedOrderPanel, padded_n - panel * kFixedOrderPanel);
}

/// Lanes of the panel's last register that hold real columns (n may not be a multiple of 16).
__mmask16 last_vector_mask(int64_t n, int64_t last_vector_col) {
  const int64_t valid = n - last_vector_col;
  return valid >= kLanes ? static_cast<__mmask16>(0xFFFF)
                         : static_cast<__mmask16>((1u << valid) - 1u);
}

/// Splits panels [0, panels) over `num_threads` OpenMP threads (contiguous static ranges) and
/// runs `body(first, last)` on each; one thread runs everything inline.
template <typename Body>
void for_panel_ranges(int64_t panels, int64_t work, int num_threads, const Body& body) {
  // At most one thread per panel and per kMinWorkPerThread of work: a fork/join costs a few
  // microseconds, more than a small GEMM gains from a second thread.
  const int64_t by_work = std::max<int64_t>(1, work / kMinWorkPerThread);
  const int threads = static_cast<int>(
      std::min<int64_t>(std::min<int64_t>(std::max(num_threads, 1), panels), by_work));
  if (threads <= 1) {
    body(int64_t{0}, panels);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    // Each thread owns whole panels, so each output element is computed by one thread, in
    // the same order as single-threaded.
#pragma omp for schedule(static)
    for (int t = 0; t < threads; ++t) {
      const int64_t first = panels * t / threads;
      const int64_t last = panels * (t + 1) / threads;
      body(first, last);
    }
  }
}

// --- register blocks ---------------------------------------------------------------------

/// The MR × NV accumulators of a register block: the partial sums in c (`accumulate`: a
/// previous k-block ran) or zeros. Lanes past n (last_mask) are zero and never stored.
template <int MR, int NV>
MUFLOW_TARGET_AVX512 inline void load_acc(__m512 (&acc)[MR][NV], const float* c, int64_t ldc,
                                          bool accumulate, __mmask16 last_mask) {
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __mmask16 mask = v == NV - 1 ? last_mask : static_cast<__mmask16>(0xFFFF);
      acc[m][v] =
          accumulate ? _mm512_maskz_loadu_ps(mask, c + m * ldc + v * kLanes) : _mm512_setzero_ps();
    }
  }
}

/// Stores the accumulators to c, adding `bias` first when given (after the last k-block).
template <int MR, int NV>
MUFLOW_TARGET_AVX512 inline void store_acc(const __m512 (&acc)[MR][NV], float* c, int64_t ldc,
                                           const float* bias, __mmask16 last_mask) {
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __mmask16 mask = v == NV - 1 ? last_mask : static_cast<__mmask16>(0xFFFF);
      __m512 out = acc[m][v];
      if (bias != nullptr) out = _mm512_add_ps(out, _mm512_maskz_loadu_ps(mask, bias + v * kLanes));
      _mm512_mask_storeu_ps(c + m * ldc + v * kLanes, mask, out);
    }
  }
}

// --- f32 -----------------------------------------------------------------------------------

/// One register block: rows [0, MR) × vectors [0, NV) of a panel, reduction steps [0, kc).
/// `accumulate`: continue the partial sums in c (a previous k-block); `bias`: add it after
/// the last step (nullptr before the last k-block or without bias).
/// 16 weights as f32: loaded (float), or bf16 bits widened exactly (uint16_t: the f32 with
/// the same upper 16 bits), so a bf16 matrix costs half the bytes and gives the bits of its
/// f32 up-conversion.
template <typename W>
MUFLOW_TARGET_AVX512 inline __m512 load_weights(const W* p) {
  if constexpr (std::is_same_v<W, float>) {
    return _mm512_load_ps(p);
  } else {
    const __m512i wide =
        _mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
}

template <int MR, int NV, bool PF, typename W>
MUFLOW_TARGET_AVX512 void block_f32(const float* a, int64_t lda, const W* w, int64_t ldw,
                                    int64_t kc, float* c, int64_t ldc, bool accumulate,
                                    const float* bias, __mmask16 last_mask) {
  __m512 acc[MR][NV];
  load_acc<MR, NV>(acc, c, ldc, accumulate, last_mask);
  for (int64_t kk = 0; kk < kc; ++kk) {
    __m512 wv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      // PF (weights streamed once, from DRAM: decode): fetch kPrefetchSteps rows ahead, which
      // also runs into the panel's next slice (contiguous); a prefetch never faults.
      if constexpr (PF) {
        _mm_prefetch(reinterpret_cast<const char*>(w + (kk + kPrefetchSteps) * ldw + v * kLanes),
                     _MM_HINT_T0);
      }
      wv[v] = load_weights<W>(w + kk * ldw + v * kLanes);
    }
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      const __m512 av = _mm512_set1_ps(a[m * lda + kk]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_fmadd_ps(av, wv[v], acc[m][v]);
    }
  }
  store_acc<MR, NV>(acc, c, ldc, bias, last_mask);
}

template <typename W>
using BlockF32 = void (*)(const float*, int64_t, const W*, int64_t, int64_t, float*, int64_t, bool,
                          const float*, __mmask16);

#define MUFLOW_F32_ROW(MR, PF)                                                 \
  {                                                                            \
    block_f32<MR, 1, PF, W>, block_f32<MR, 2, PF, W>, block_f32<MR, 3, PF, W>, \
        block_f32<MR, 4, PF, W>                                                \
  }
#define MUFLOW_F32_TABLE(PF)                                                                    \
  {                                                                                             \
    MUFLOW_F32_ROW(1, PF), MUFLOW_F32_ROW(2, PF), MUFLOW_F32_ROW(3, PF), MUFLOW_F32_ROW(4, PF), \
        MUFLOW_F32_ROW(5, PF), MUFLOW_F32_ROW(6, PF)                                            \
  }
/// [prefetch][rows - 1][vectors - 1], for f32 (float) or bf16 (uint16_t) weights.
template <typename W>
constexpr BlockF32<W> kBlocksF32[2][kRows][kMaxVecs] = {MUFLOW_F32_TABLE(false),
                                                        MUFLOW_F32_TABLE(true)};
#undef MUFLOW_F32_TABLE
#undef MUFLOW_F32_ROW

// --- f32, AVX2 + FMA ------------------------------------------------------------------------
// The same packed panels, the same table shape and the same order per output element as the
// AVX-512 blocks above (one FMA per reduction step, k ascending, bias added last), so the same
// bits, with 8 lanes per register: a 16-column vector of the panel is two ymm halves. With 16
// ymm registers a block of MR rows × NV vectors runs as chunks of avx2_chunk_vectors(MR)
// vectors, each chunk over all kc steps (a column's steps never leave their order).

constexpr int kHalfLanes = 8;  // f32 per ymm

/// Vectors per chunk for MR rows: at most 12 accumulators (2 per row and vector), which leaves
/// registers for one vector's two weight halves and the row value broadcast (15 of 16 ymm).
constexpr int avx2_chunk_vectors(int mr) { return mr == 1 ? 4 : mr == 2 ? 3 : mr == 3 ? 2 : 1; }

/// 8 weights as f32 (see load_weights): loaded, or bf16 bits widened exactly.
template <typename W>
MUFLOW_TARGET_AVX2 inline __m256 load_weights_avx2(const W* p) {
  if constexpr (std::is_same_v<W, float>) {
    return _mm256_load_ps(p);
  } else {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
}

/// One chunk: rows [0, MR) × CV vectors of a panel, reduction steps [0, kc); `valid`: the real
/// columns of the chunk's last vector (16 unless it is the panel's last and n is not a multiple
/// of 16); PF: prefetch `prefetch_vectors` vectors of each step kPrefetchSteps ahead (the
/// block's first chunk takes the whole width, so that the later chunks read the slice from L1:
/// each chunk alone reads one line in four of a 64-column panel's steps, a stride the hardware
/// prefetchers do not run ahead of). Otherwise as block_f32.
template <int MR, int CV, bool PF, typename W>
MUFLOW_TARGET_AVX2 void chunk_f32_avx2(const float* a, int64_t lda, const W* w, int64_t ldw,
                                       int64_t kc, float* c, int64_t ldc, bool accumulate,
                                       const float* bias, int valid, int prefetch_vectors) {
  constexpr int kHalves = 2 * CV;
  int lanes[kHalves];  // real columns per half: 8 but in the last vector
  for (int h = 0; h < kHalves; ++h) {
    const int in_last = valid - (h - (kHalves - 2)) * kHalfLanes;
    lanes[h] = h < kHalves - 2 ? kHalfLanes : std::clamp(in_last, 0, kHalfLanes);
  }
  __m256 acc[MR][kHalves];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 8
    for (int h = 0; h < kHalves; ++h) {
      const float* src = c + m * ldc + h * kHalfLanes;
      acc[m][h] = !accumulate              ? _mm256_setzero_ps()
                  : lanes[h] == kHalfLanes ? _mm256_loadu_ps(src)
                                           : _mm256_maskload_ps(src, avx2_lanes_below(lanes[h]));
    }
  }
  for (int64_t kk = 0; kk < kc; ++kk) {
    if constexpr (PF) {
      for (int v = 0; v < prefetch_vectors; ++v) {
        _mm_prefetch(reinterpret_cast<const char*>(w + (kk + kPrefetchSteps) * ldw + v * kLanes),
                     _MM_HINT_T0);
      }
    }
#pragma GCC unroll 4
    for (int v = 0; v < CV; ++v) {
      const __m256 w0 = load_weights_avx2<W>(w + kk * ldw + v * kLanes);
      const __m256 w1 = load_weights_avx2<W>(w + kk * ldw + v * kLanes + kHalfLanes);
#pragma GCC unroll 8
      for (int m = 0; m < MR; ++m) {
        const __m256 av = _mm256_broadcast_ss(a + m * lda + kk);
        acc[m][2 * v] = _mm256_fmadd_ps(av, w0, acc[m][2 * v]);
        acc[m][2 * v + 1] = _mm256_fmadd_ps(av, w1, acc[m][2 * v + 1]);
      }
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 8
    for (int h = 0; h < kHalves; ++h) {
      if (lanes[h] == 0) continue;
      const __m256i mask = avx2_lanes_below(lanes[h]);
      __m256 out = acc[m][h];
      if (bias != nullptr) {
        const float* b = bias + h * kHalfLanes;
        out = _mm256_add_ps(
            out, lanes[h] == kHalfLanes ? _mm256_loadu_ps(b) : _mm256_maskload_ps(b, mask));
      }
      float* dst = c + m * ldc + h * kHalfLanes;
      if (lanes[h] == kHalfLanes) {
        _mm256_storeu_ps(dst, out);
      } else {
        _mm256_maskstore_ps(dst, mask, out);
      }
    }
  }
}

/// A register block of the AVX-512 blocks' signature (the table below), as chunks from vector
/// V0 on: the real columns of the last vector are the set bits of `last_mask` (its low ones).
template <int MR, int NV, bool PF, typename W, int V0 = 0>
MUFLOW_TARGET_AVX2 void block_f32_avx2(const float* a, int64_t lda, const W* w, int64_t ldw,
                                       int64_t kc, float* c, int64_t ldc, bool accumulate,
                                       const float* bias, __mmask16 last_mask) {
  constexpr int kChunk = std::min(avx2_chunk_vectors(MR), NV - V0);
  const int valid = V0 + kChunk == NV ? __builtin_popcount(last_mask) : kLanes;
  chunk_f32_avx2<MR, kChunk, PF, W>(a, lda, w + V0 * kLanes, ldw, kc, c + V0 * kLanes, ldc,
                                    accumulate, bias != nullptr ? bias + V0 * kLanes : nullptr,
                                    valid, V0 == 0 ? NV : 0);
  if constexpr (V0 + kChunk < NV) {
    block_f32_avx2<MR, NV, PF, W, V0 + kChunk>(a, lda, w, ldw, kc, c, ldc, accumulate, bias,
                                               last_mask);
  }
}

#define MUFLOW_F32_AVX2_ROW(MR, PF)                                                           \
  {                                                                                           \
    block_f32_avx2<MR, 1, PF, W>, block_f32_avx2<MR, 2, PF, W>, block_f32_avx2<MR, 3, PF, W>, \
        block_f32_avx2<MR, 4, PF, W>                                                          \
  }
#define MUFLOW_F32_AVX2_TABLE(PF)                                                          \
  {                                                                                        \
    MUFLOW_F32_AVX2_ROW(1, PF), MUFLOW_F32_AVX2_ROW(2, PF), MUFLOW_F32_AVX2_ROW(3, PF),    \
        MUFLOW_F32_AVX2_ROW(4, PF), MUFLOW_F32_AVX2_ROW(5, PF), MUFLOW_F32_AVX2_ROW(6, PF) \
  }
/// [prefetch][rows - 1][vectors - 1], as kBlocksF32.
template <typename W>
constexpr BlockF32<W> kBlocksF32Avx2[2][kRows][kMaxVecs] = {MUFLOW_F32_AVX2_TABLE(false),
                                                            MUFLOW_F32_AVX2_TABLE(true)};
#undef MUFLOW_F32_AVX2_TABLE
#undef MUFLOW_F32_AVX2_ROW

/// The register blocks of `isa` (f32 layouts).
template <typename W>
const BlockF32<W> (&blocks_f32(VectorIsa isa))[2][kRows][kMaxVecs] {
  return isa == VectorIsa::kAvx512 ? kBlocksF32<W> : kBlocksF32Avx2<W>;
}

/// The AVX2 blocks' k-block for any row count: a register block walks its kc steps once per
/// chunk (up to four), so the slice is sized to stay in L1 between them: 64 steps × 64 columns
/// × 4 B = 16 KiB (the block's first chunk prefetches the whole slice). On the 2-core AVX2 VM
/// 64, 128 and 256 measured the same within its noise at M = 4 to 512, and so did a whole-k
/// pass for ≤ 6 rows (bench/README.md, "AVX2 hosts").
constexpr int64_t kAvx2KBlock = 64;

/// sweep_panels' k-blocks (few rows, many rows) for `isa`: AVX-512 keeps a few rows' sums in
/// registers for the whole reduction (no partial sums through y).
std::pair<int64_t, int64_t> k_blocks_f32(VectorIsa isa) {
  return isa == VectorIsa::kAvx512
             ? std::pair<int64_t, int64_t>{std::numeric_limits<int64_t>::max(), kFixedOrderKBlock}
             : std::pair<int64_t, int64_t>{kAvx2KBlock, kAvx2KBlock};
}

/// Panels [first, last) of y for all rows, with `table`'s register blocks: row blocks, then
/// (decode) each panel's k-blocks or (many rows) each group's k-blocks across its panels, then
/// register blocks of kRows rows. Every output element's sum runs k ascending whatever the
/// blocking. `reduction`: k (f32 layouts) or padded k (bf16 pairs); `pair`: reduction elements
/// per weight step (1, or 2 for `vdpbf16ps`); `few_rows_k_block` / `many_rows_k_block`: the
/// k-block with at most / more than kRows rows. Plain code: the vector work happens in the
/// register blocks.
template <typename X, typename W, typename Block>
void sweep_panels(const W* packed, int64_t n, int64_t reduction, int64_t pair,
                  int64_t few_rows_k_block, int64_t many_rows_k_block,
                  const Block (&table)[2][kRows][kMaxVecs], const X* x, int64_t num_rows,
                  const float* bias, float* y, int64_t first, int64_t last) {
  const int64_t padded_n = fixed_order_padded_n(n);
  const int64_t k_block =
      std::min(reduction, num_rows <= kRows ? few_rows_k_block : many_rows_k_block);
  // Up to kPanelMajorRows rows (decode), each panel is finished before the next starts, so
  // the weights stream once, sequentially (and are prefetched); more rows sweep a group of
  // panels per k-block, so the x slice of the block stays in L2 across panels.
  const bool panel_major = num_rows <= kPanelMajorRows;
  auto run = [&](int64_t row0, int64_t row_end, int64_t k0, int64_t panel) {
    const int64_t kc = std::min(k_block, reduction - k0);
    const int64_t col0 = panel * kFixedOrderPanel;
    const int64_t width = panel_width(padded_n, panel);
    const int vecs = static_cast<int>(width / kLanes);
    const __mmask16 mask = last_vector_mask(n, col0 + (vecs - 1) * kLanes);
    const W* w = packed + col0 * reduction + k0 * width;
    const float* b = (k0 + kc == reduction && bias != nullptr) ? bias + col0 : nullptr;
    for (int64_t row = row0; row < row_end; row += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, row_end - row));
      table[panel_major ? 1 : 0][rows - 1][vecs - 1](x + row * reduction + k0, reduction, w,
                                                     pair * width, kc / pair, y + row * n + col0, n,
                                                     k0 > 0, b, mask);
    }
  };
  for (int64_t row0 = 0; row0 < num_rows; row0 += kRowBlock) {
    const int64_t row_end = std::min(num_rows, row0 + kRowBlock);
    if (panel_major) {
      for (int64_t panel = first; panel < last; ++panel) {
        for (int64_t k0 = 0; k0 < reduction; k0 += k_block) run(row0, row_end, k0, panel);
      }
    } else {
      // Panel groups bound the partial sums a k-block sweep touches (rows × group columns)
      // to L2, next to the group's weight slices and the rows' x slice.
      for (int64_t group = first; group < last; group += kPanelGroup) {
        const int64_t group_end = std::min(last, group + kPanelGroup);
        for (int64_t k0 = 0; k0 < reduction; k0 += k_block) {
          for (int64_t panel = group; panel < group_end; ++panel) run(row0, row_end, k0, panel);
        }
      }
    }
  }
}

// --- bf16 ----------------------------------------------------------------------------------

/// As block_f32 with `vdpbf16ps`: a [MR rows, kp pairs] of bf16 x (row stride lda elements)
/// times a panel slice [kp pairs][NV·16 columns][2].
template <int MR, int NV, bool PF>
MUFLOW_TARGET_AVX512_BF16 void block_bf16(const uint16_t* a, int64_t lda, const uint16_t* w,
                                          int64_t ldw, int64_t pairs, float* c, int64_t ldc,
                                          bool accumulate, const float* bias, __mmask16 last_mask) {
  __m512 acc[MR][NV];
  load_acc<MR, NV>(acc, c, ldc, accumulate, last_mask);
  for (int64_t j = 0; j < pairs; ++j) {
    __m512bh wv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      if constexpr (PF) {
        _mm_prefetch(reinterpret_cast<const char*>(w + (j + kPrefetchSteps) * ldw + v * 2 * kLanes),
                     _MM_HINT_T0);
      }
      wv[v] = reinterpret_cast<__m512bh>(_mm512_load_si512(w + j * ldw + v * 2 * kLanes));
    }
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      int32_t pair = 0;
      std::memcpy(&pair, a + m * lda + 2 * j, sizeof(pair));
      const __m512bh av = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_dpbf16_ps(acc[m][v], av, wv[v]);
    }
  }
  store_acc<MR, NV>(acc, c, ldc, bias, last_mask);
}

using BlockBf16 = void (*)(const uint16_t*, int64_t, const uint16_t*, int64_t, int64_t, float*,
                           int64_t, bool, const float*, __mmask16);

#define MUFLOW_BF16_ROW(MR, PF) \
  { block_bf16<MR, 1, PF>, block_bf16<MR, 2, PF>, block_bf16<MR, 3, PF>, block_bf16<MR, 4, PF> }
#define MUFLOW_BF16_TABLE(PF)                                                  \
  {                                                                            \
    MUFLOW_BF16_ROW(1, PF), MUFLOW_BF16_ROW(2, PF), MUFLOW_BF16_ROW(3, PF),    \
        MUFLOW_BF16_ROW(4, PF), MUFLOW_BF16_ROW(5, PF), MUFLOW_BF16_ROW(6, PF) \
  }
/// [prefetch][rows - 1][vectors - 1]
constexpr BlockBf16 kBlocksBf16[2][kRows][kMaxVecs] = {MUFLOW_BF16_TABLE(false),
                                                       MUFLOW_BF16_TABLE(true)};
#undef MUFLOW_BF16_TABLE
#undef MUFLOW_BF16_ROW

/// W [n, k] (f32 or bf16 bits) → the f32 panel layout: panel p as [k][w_p], zero padding
/// columns.
template <typename T>
void pack_panels(const T* w, int64_t n, int64_t k, T* packed) {
  const int64_t padded_n = fixed_order_padded_n(n);
  for (int64_t panel = 0; panel < num_panels(padded_n); ++panel) {
    const int64_t col0 = panel * kFixedOrderPanel;
    const int64_t width = panel_width(padded_n, panel);
    T* out = packed + col0 * k;
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t j = 0; j < width; ++j) {
        const int64_t col = col0 + j;
        out[kk * width + j] = col < n ? w[col * k + kk] : T{0};
      }
    }
  }
}

}  // namespace

bool fixed_order_gemm_f32_available() { return widest_vector_isa().has_value(); }

bool fixed_order_gemm_bf16_available() { return cpu_has_avx512_bf16(); }

int64_t fixed_order_padded_n(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

int64_t fixed_order_padded_k_bf16(int64_t k) { return (k + 1) / 2 * 2; }

std::size_t fixed_order_packed_elems_f32(int64_t n, int64_t k) {
  return static_cast<std::size_t>(fixed_order_padded_n(n)) * static_cast<std::size_t>(k);
}

std::size_t fixed_order_packed_elems_bf16(int64_t n, int64_t k) {
  return static_cast<std::size_t>(fixed_order_padded_n(n)) *
         static_cast<std::size_t>(fixed_order_padded_k_bf16(k));
}

void fixed_order_pack_f32(const float* w, int64_t n, int64_t k, float* packed) {
  MUFLOW_ASSERT(w != nullptr && packed != nullptr && n > 0 && k > 0,
                "fixed_order_pack_f32: bad arguments");
  pack_panels(w, n, k, packed);
}

void fixed_order_pack_bf16_weights(const uint16_t* w, int64_t n, int64_t k, uint16_t* packed) {
  MUFLOW_ASSERT(w != nullptr && packed != nullptr && n > 0 && k > 0,
                "fixed_order_pack_bf16_weights: bad arguments");
  pack_panels(w, n, k, packed);
}

void fixed_order_pack_bf16(const uint16_t* w, int64_t n, int64_t k, uint16_t* packed) {
  MUFLOW_ASSERT(w != nullptr && packed != nullptr && n > 0 && k > 0,
                "fixed_order_pack_bf16: bad arguments");
  const int64_t padded_n = fixed_order_padded_n(n);
  const int64_t padded_k = fixed_order_padded_k_bf16(k);
  for (int64_t panel = 0; panel < num_panels(padded_n); ++panel) {
    const int64_t col0 = panel * kFixedOrderPanel;
    const int64_t width = panel_width(padded_n, panel);
    uint16_t* out = packed + col0 * padded_k;
    for (int64_t kk = 0; kk < padded_k; ++kk) {
      for (int64_t j = 0; j < width; ++j) {
        const int64_t col = col0 + j;
        out[(kk / 2) * 2 * width + 2 * j + kk % 2] =
            (col < n && kk < k) ? w[col * k + kk] : uint16_t{0};
      }
    }
  }
}

void fixed_order_gemm_f32(const float* packed, int64_t n, int64_t k, const float* x,
                          int64_t num_rows, const float* bias, float* y, int num_threads,
                          std::optional<VectorIsa> isa) {
  MUFLOW_ASSERT(num_rows >= 0 && n > 0 && k > 0, "fixed_order_gemm_f32: bad sizes");
  if (num_rows == 0) return;
  MUFLOW_ASSERT(packed != nullptr && x != nullptr && y != nullptr,
                "fixed_order_gemm_f32: null packed, x or y");
  if (!isa) isa = widest_vector_isa();
  MUFLOW_ASSERT(isa && cpu_has_isa(*isa),
                "fixed_order_gemm_f32: CPU lacks AVX-512F and AVX2+FMA (or the ISA asked for)");
  MUFLOW_ASSERT(reinterpret_cast<std::uintptr_t>(packed) % 64 == 0,
                "fixed_order_gemm_f32: packed weights must be 64-byte aligned");
  for_panel_ranges(num_panels(fixed_order_padded_n(n)), (num_rows + kWeightCost) * n * k,
                   num_threads, [&](int64_t first, int64_t last) {
                     const auto [few, many] = k_blocks_f32(*isa);
                     sweep_panels(packed, n, k, 1, few, many, blocks_f32<float>(*isa), x, num_rows,
                                  bias, y, first, last);
                   });
}

void fixed_order_gemm_bf16_weights(const uint16_t* packed, int64_t n, int64_t k, const float* x,
                                   int64_t num_rows, const float* bias, float* y, int num_threads,
                                   std::optional<VectorIsa> isa) {
  MUFLOW_ASSERT(num_rows >= 0 && n > 0 && k > 0, "fixed_order_gemm_bf16_weights: bad sizes");
  if (num_rows == 0) return;
  MUFLOW_ASSERT(packed != nullptr && x != nullptr && y != nullptr,
                "fixed_order_gemm_bf16_weights: null packed, x or y");
  if (!isa) isa = widest_vector_isa();
  MUFLOW_ASSERT(isa && cpu_has_isa(*isa),
                "fixed_order_gemm_bf16_weights: CPU lacks AVX-512F and AVX2+FMA (or the ISA asked "
                "for)");
  MUFLOW_ASSERT(reinterpret_cast<std::uintptr_t>(packed) % 64 == 0,
                "fixed_order_gemm_bf16_weights: packed weights must be 64-byte aligned");
  for_panel_ranges(num_panels(fixed_order_padded_n(n)), (num_rows + kWeightCost / 2) * n * k,
                   num_threads, [&](int64_t first, int64_t last) {
                     const auto [few, many] = k_blocks_f32(*isa);
                     sweep_panels(packed, n, k, 1, few, many, blocks_f32<uint16_t>(*isa), x,
                                  num_rows, bias, y, first, last);
                   });
}

void fixed_order_gemm_f32_scalar(const float* w, int64_t n, int64_t k, const float* x,
                                 int64_t num_rows, const float* bias, float* y) {
  for (int64_t m = 0; m < num_rows; ++m) {
    for (int64_t col = 0; col < n; ++col) {
      float acc = 0.0f;
      for (int64_t kk = 0; kk < k; ++kk) acc = std::fma(x[m * k + kk], w[col * k + kk], acc);
      y[m * n + col] = bias != nullptr ? acc + bias[col] : acc;
    }
  }
}

void fixed_order_gemm_bf16(const uint16_t* packed, int64_t n, int64_t k, const uint16_t* x_bf16,
                           int64_t num_rows, const float* bias, float* y, int num_threads) {
  MUFLOW_ASSERT(num_rows >= 0 && n > 0 && k > 0, "fixed_order_gemm_bf16: bad sizes");
  if (num_rows == 0) return;
  MUFLOW_ASSERT(packed != nullptr && x_bf16 != nullptr && y != nullptr,
                "fixed_order_gemm_bf16: null packed, x or y");
  MUFLOW_ASSERT(fixed_order_gemm_bf16_available(), "fixed_order_gemm_bf16: CPU lacks AVX512-BF16");
  MUFLOW_ASSERT(reinterpret_cast<std::uintptr_t>(packed) % 64 == 0,
                "fixed_order_gemm_bf16: packed weights must be 64-byte aligned");
  for_panel_ranges(num_panels(fixed_order_padded_n(n)), (num_rows + kWeightCost) * n * k,
                   num_threads, [&](int64_t first, int64_t last) {
                     sweep_panels(packed, n, fixed_order_padded_k_bf16(k), 2,
                                  std::numeric_limits<int64_t>::max(), kKBlockBf16, kBlocksBf16,
                                  x_bf16, num_rows, bias, y, first, last);
                   });
}

}  // namespace muflow::kernels::cpu
