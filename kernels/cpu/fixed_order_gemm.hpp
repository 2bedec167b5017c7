#pragma once
/// \file
/// A GEMM whose reduction order per output element is fixed and independent of M, the number
/// of rows (issue #16, item 2): batch invariant by construction, for every M from 1 up, with
/// no padding and no probe.
///
/// y[m, n] = (((0 + x[m,0]·W[n,0]) + x[m,1]·W[n,1]) + … + x[m,K-1]·W[n,K-1]) + bias[n]
///
/// f32: each step is one fused multiply-add (one rounding), k ascending, starting from +0,
/// bias (if any) added last. That is exactly `std::fma` applied in that order, so
/// `fixed_order_gemm_f32_scalar` gives the same bits and serves as the oracle: the AVX-512
/// kernel vectorises over n (16 output columns per register) and over up to 6 rows, but never
/// reorders a sum, and so does the AVX2 kernel (8 columns per register, FMA's `vfmadd231ps`:
/// the same single rounding), which runs where the CPU has no AVX-512F: the f32 results are
/// the same bits on either kind of CPU. A row's result therefore depends on that row and W
/// alone, not on M, its position, the row/column blocking or the number of threads (each
/// output element is computed by exactly one thread).
///
/// bf16 (AVX512-BF16 `vdpbf16ps`): x and W in bf16, f32 accumulation; each step adds the two
/// products of a k pair (2j, 2j+1), j ascending, as the instruction defines it (its internal
/// rounding and denormal flushing are the hardware's; the same for every row). K is padded to
/// even with a zero.
///
/// Where the time goes: the weights are packed once into column panels of up to
/// kFixedOrderPanel columns, k-major inside a panel, so the kernel streams each panel once
/// per call (prefetched, for ≤ 48 rows) or reuses each kFixedOrderKBlock-deep slice from L2
/// for every 6-row × 64-column register block (more rows). This is the register/cache
/// blocking of Goto & van de Geijn, "Anatomy of high-performance matrix multiplication"
/// (ACM TOMS 34(3), 2008), with the A-packing left out and the k order kept fixed. Measured
/// against oneDNN in bench/README.md ("Fixed-order GEMM").
///
/// Units and errors: sizes are elements; `x`, `y`, `bias` are f32 (bf16 bits where named so).
/// Sizes ≤ 0 (num_rows < 0), a null pointer, packed weights not 64-byte aligned, or calling a
/// kernel the CPU lacks (check fixed_order_gemm_*_available first) abort through
/// MUFLOW_ASSERT: callers pass trusted sizes (Linear validates them).
///
/// Thread safety: the functions are pure (read the inputs, write `y`); any thread.
/// `num_threads` > 1 splits the panels over an OpenMP team of up to that size (contiguous
/// static ranges; at most one thread per panel and per 2^20 multiply-adds, a weight counting
/// as 16, so small GEMMs stay on the calling thread): results are bitwise the same for any thread
/// count. Like any OpenMP code, more threads than idle cores (another busy process, several
/// devices' teams) makes a call wait for descheduled team members: measured up to 50× slower on 2
/// busy cores.

#include <cstddef>
#include <cstdint>
#include <optional>

#include "kernels/cpu/cpu_features.hpp"

namespace muflow::kernels::cpu {

/// Output columns per packed panel (4 AVX-512 registers of f32).
inline constexpr int64_t kFixedOrderPanel = 64;
/// Reduction depth of one pass over a panel slice (elements of k) when more than 6 rows share
/// a call: 256 × 64 f32 = 64 KiB, which stays in L2 while every row block reads it (measured
/// 3–5 % faster than 128 (an L1-sized slice) and than 512 at M = 128 and 512).
inline constexpr int64_t kFixedOrderKBlock = 256;

/// True when the CPU runs an f32 kernel: AVX-512F, or AVX2 with FMA.
bool fixed_order_gemm_f32_available();
/// True when the CPU runs the AVX512-BF16 kernel (also needs AVX-512F; checked once).
bool fixed_order_gemm_bf16_available();

/// N rounded up to a multiple of 16 (the packed layouts' column count).
int64_t fixed_order_padded_n(int64_t n);
/// K rounded up to even (the bf16 layouts' reduction length; x rows for the bf16 kernel have
/// this many elements).
int64_t fixed_order_padded_k_bf16(int64_t k);

/// Elements (floats) of the packed f32 weights of an [n, k] matrix: padded_n · k.
std::size_t fixed_order_packed_elems_f32(int64_t n, int64_t k);
/// Elements (uint16 bf16 bits) of the packed bf16 weights: padded_n · padded_k_bf16.
std::size_t fixed_order_packed_elems_bf16(int64_t n, int64_t k);

/// Packs W `[n, k]` row-major f32 (HF's `[out, in]`) into `packed`
/// (fixed_order_packed_elems_f32 floats, 64-byte aligned): panel p holds columns
/// [64p, 64p + w_p) as `[k][w_p]`, w_p = min(64, padded_n − 64p); padding columns are 0.
void fixed_order_pack_f32(const float* w, int64_t n, int64_t k, float* packed);
/// Packs W `[n, k]` bf16 bits into `packed` (fixed_order_packed_elems_bf16 elements, 64-byte
/// aligned): panel p as `[padded_k / 2][w_p][2]` (the k pair of one column adjacent).
void fixed_order_pack_bf16(const uint16_t* w, int64_t n, int64_t k, uint16_t* packed);

/// y[m, n] for m < num_rows: `x` [num_rows, k] f32 (row stride k), `packed` from
/// fixed_order_pack_f32, `bias` [n] or nullptr, `y` [num_rows, n] (row stride n, written;
/// also used for partial sums, so it must not overlap x). Needs
/// fixed_order_gemm_f32_available(). num_rows may be 0. `isa`: the kernels to run (nullopt:
/// the widest the CPU has; one it lacks aborts), the same bits with either.
void fixed_order_gemm_f32(const float* packed, int64_t n, int64_t k, const float* x,
                          int64_t num_rows, const float* bias, float* y, int num_threads = 1,
                          std::optional<VectorIsa> isa = std::nullopt);

/// The same bits as fixed_order_gemm_f32 from plain `std::fma` loops over unpacked W `[n, k]`:
/// the oracle for the kernel's order (slow; tests only). Any CPU.
void fixed_order_gemm_f32_scalar(const float* w, int64_t n, int64_t k, const float* x,
                                 int64_t num_rows, const float* bias, float* y);

/// bf16 weights computed in f32, for a CPU without AVX512-BF16 (needs an f32 ISA): W stays
/// bf16 in memory (half the bytes of its f32 up-conversion, which decode streams every token)
/// in the f32 panel layout, packed by fixed_order_pack_bf16_weights (fixed_order_packed_elems_f32
/// uint16 elements, 64-byte aligned); each weight is widened to f32 exactly in registers, so
/// the result is bitwise fixed_order_gemm_f32 on the up-converted weights. `x` f32 as there.
void fixed_order_pack_bf16_weights(const uint16_t* w, int64_t n, int64_t k, uint16_t* packed);
void fixed_order_gemm_bf16_weights(const uint16_t* packed, int64_t n, int64_t k, const float* x,
                                   int64_t num_rows, const float* bias, float* y,
                                   int num_threads = 1,
                                   std::optional<VectorIsa> isa = std::nullopt);

/// bf16 kernel: `x_bf16` [num_rows, fixed_order_padded_k_bf16(k)] bf16 bits (a zero in the
/// padding column), `packed` from fixed_order_pack_bf16; otherwise as fixed_order_gemm_f32.
/// Needs fixed_order_gemm_bf16_available().
void fixed_order_gemm_bf16(const uint16_t* packed, int64_t n, int64_t k, const uint16_t* x_bf16,
                           int64_t num_rows, const float* bias, float* y, int num_threads = 1);

}  // namespace muflow::kernels::cpu
