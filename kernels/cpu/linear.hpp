#pragma once
/// \file
/// Batch-invariant dense layer on oneDNN matmul with prepacked weights.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/cpu/bf16_compute.hpp"

namespace muflow::kernels::cpu {

/// Row tile of every GEMM call (rows of x per oneDNN primitive execution). All full tiles use
/// the same primitive shape `[kLinearMTile, in] x [in, out]`, so a row's reduction order
/// never depends on how many rows share its batch (batch invariance; the last tile is
/// zero-padded unless the checked small-M path below takes it). See bench/linear_bench.cpp
/// for what this costs versus per-M primitives.
inline constexpr int64_t kLinearMTile = 16;

/// Rows of the small-M (GEMV-shaped) primitive of the checked fast path: `[1, in] x [in, out]`.
inline constexpr int64_t kLinearSmallM = 1;

/// The remainder of a call (num_rows mod kLinearMTile rows; all rows when num_rows <
/// kLinearMTile) runs through the small primitive, one row per execution, when it has at most
/// this many rows and the fast path is enabled; a larger remainder runs as one zero-padded
/// tile. Each single-row execution streams the whole weight matrix again, so with weights that
/// are not cache-resident (the MoE case) r rows cost about r weight passes versus one for the
/// tile. Measured (bench/README.md, "Small-M fast path"): f32 wins at 1 row and loses at 2
/// with 32 MiB of weights; bf16 (half the bytes, cheaper padded tile relative to a pass) wins
/// at 2 and loses at 4.
inline constexpr int64_t kLinearSmallMMaxRowsF32 = 1;
inline constexpr int64_t kLinearSmallMMaxRowsBF16 = 2;

/// Weight element type accepted by Linear.
enum class LinearWeightType { kF32, kBF16 };

/// Which GEMM a Linear runs.
enum class LinearKernel {
  /// kFixedOrder where the CPU runs it (AVX-512F or AVX2+FMA for f32 compute; AVX512-BF16
  /// for bf16 compute), else kOneDnnTiles.
  kAuto,
  /// muflow's fixed-order GEMM (kernels/cpu/fixed_order_gemm.hpp): batch invariant by
  /// construction at every M, no padding, no probe; can use several threads
  /// (GemmThreadsScope) with the same bits. Falls back to kOneDnnTiles where unavailable.
  kFixedOrder,
  /// oneDNN's matmul on fixed 16-row tiles with the checked small-M path (below).
  kOneDnnTiles,
};

/// Construction options of Linear (the defaults are what the engine uses).
struct LinearOptions {
  /// The GEMM; kAuto picks the fixed-order kernel where the CPU has it.
  LinearKernel kernel = LinearKernel::kAuto;
  /// Try the small-M fast path (it is still enabled only if the construction probe passes).
  /// false: every call runs padded tiles (benchmarks use it as the baseline).
  bool allow_small_m_path = true;
  /// bf16 weights only: compute in bf16, or in f32 on the weights' exact f32 values
  /// (kernels/cpu/bf16_compute.hpp). kAuto picks by the CPU's ISA.
  Bf16Compute bf16_compute = Bf16Compute::kAuto;
  /// Test hook: flips one bit of the small primitive's probe output, so the probe fails and
  /// the fast path stays disabled: exercises the fallback on a machine where it would pass.
  /// Bypasses the per-process probe verdict cache (neither reads nor writes it).
  bool force_probe_mismatch = false;
};

/// y[m, out] = x[m, in] · Wᵀ (+ bias), W stored as HF does: `[out, in]` row-major.
///
/// Two GEMMs (LinearOptions::kernel, `kernel()` says which one a Linear runs):
///  * Fixed-order (the default where the CPU has AVX-512F or AVX2+FMA, and AVX512-BF16 for
///    bf16 compute): kernels/cpu/fixed_order_gemm.hpp. Each output element is one fused
///    multiply-add chain over k ascending, whatever M, so a row's bits never depend on its
///    batch; no padding, no probe; the weights are packed once into its column panels. With
///    GemmThreadsScope(n) on the calling thread, each call splits its column panels over n
///    OpenMP threads: the same bits for every n. With AVX-512 within 0.95–1.01× of a oneDNN
///    matmul created for the exact M at M ≥ 128, and 1.05–1.22× at M ≤ 6; with AVX2 1.3–5.8×
///    faster than the oneDNN tiles it replaces there (bench/README.md, "Fixed-order GEMM" and
///    "AVX2 hosts").
///  * oneDNN tiles (fallback, and LinearKernel::kOneDnnTiles): described below.
///
/// oneDNN tiles: weights are reordered once, at construction, into the layout oneDNN's matmul
/// primitive prefers (prepacked). With kBF16 weights the activations are rounded to bf16 and the
/// matmul accumulates in f32 (AMX / AVX512-BF16 when the CPU has them; oneDNN's reference
/// path otherwise); outputs are f32.
///
/// Small-M fast path (checked at construction): besides the `[kLinearMTile, in]` tile
/// primitive, the constructor creates a `[kLinearSmallM, in]` primitive over the *same*
/// prepacked weights (only when oneDNN picks the identical weights layout for it; otherwise
/// the fast path stays off rather than doubling the weights' memory). It then checks that the
/// two give bitwise the same rows: kLinearMTile seeded random probe rows (per-element
/// magnitudes spread over 2^-12..2^12, a different scale per row, mixed signs; rounded to bf16
/// first when the activations are, exactly as `forward` does) run through the tile primitive
/// twice (each row at two positions, every position 0..15 covered twice) and through the small
/// primitive one row at a time, with the real weights and bias; every output row is
/// memcmp'd. Only if all agree is the fast path enabled: the remainder of a call (≤
/// kLinearSmallMMaxRowsF32 / kLinearSmallMMaxRowsBF16 rows, by the type the primitive
/// computes in) then runs one row per small execution instead of one padded tile; full tiles
/// always use the tile primitive.
///
/// Why that is sound: oneDNN's GEMM kernels run data-independent code, so a row's output is
/// a fixed function of that row alone with a fixed rounding (reduction) order per primitive
/// (the tile primitive's rows never depend on their neighbours; that is the existing batch
/// invariance). Two kernels whose per-row order (or bias / accumulation step) differs give
/// different bits on random data with spread magnitudes with overwhelming probability, so
/// agreement on every probe row at every tile position shows the orders are the same for
/// this shape, type and ISA, hence the same bits for every input. The verdict is cached per
/// process per (compute type, bf16 rounding, in, out, bias) because oneDNN's kernel choice
/// depends on that configuration, not on the weight values (the same argument the probe
/// relies on). Fallback: if the small primitive cannot be created, wants another weights
/// layout, or the probe disagrees, `small_m_path_enabled()` is false and every call runs
/// padded tiles exactly as without the fast path. Batch invariance holds either way.
///
/// Thread safety: construct on any thread; `forward` is const and may be called
/// concurrently from any number of threads (each call uses its own scratchpad). The
/// fixed-order kernel uses GemmThreadsScope's count of the calling thread. oneDNN
/// runs single-threaded inside a call (each muflow device is one executor thread): the call
/// sets the calling thread's OpenMP thread count to 1 for its duration and restores it.
/// Cost: a call of M rows runs floor(M / kLinearMTile) full tiles, then for the remainder r
/// either r single-row executions (fast path, r ≤ the threshold above) or one padded
/// tile; numbers in bench/README.md. Construction additionally runs the probe (2 tile + 16
/// single-row executions) once per configuration per process. Memory: the weights once.
/// Errors: dims ≤ 0 or a null weight pointer abort through the project assert.
class Linear {
 public:
  /// f32 weights `[out, in]`; `bias` `[out]` or nullptr. Copies what it needs.
  Linear(const float* weight, int64_t out_features, int64_t in_features, const float* bias,
         const LinearOptions& options = LinearOptions{});
  /// bf16 weights (raw bits) `[out, in]`; `bias` `[out]` f32 or nullptr.
  Linear(const uint16_t* weight_bf16, int64_t out_features, int64_t in_features,
         const float* bias, const LinearOptions& options = LinearOptions{});
  ~Linear();
  Linear(Linear&&) noexcept;
  Linear& operator=(Linear&&) noexcept;
  Linear(const Linear&) = delete;
  Linear& operator=(const Linear&) = delete;

  /// Computes `num_rows` rows. `x`: [num_rows, in] f32; `y`: [num_rows, out] f32 (written).
  /// num_rows == 0 is a no-op. x and y must not overlap.
  void forward(const float* x, int64_t num_rows, float* y) const;

  /// Bytes of the prepacked weights (the fixed-order kernel's panels, or oneDNN's layout).
  std::size_t packed_bytes() const;
  /// The prepacked weights (packed_bytes() bytes), owned by this Linear; a byte copy of them
  /// anywhere (e.g. an expert slot, HarMoEny §4.3) can stand in for them in forward_packed.
  const void* packed_data() const;
  /// forward() reading the prepacked weights from `packed` (64-byte aligned; a byte copy of
  /// packed_data(), or nullptr for this Linear's own) instead of this Linear's memory. Same
  /// primitives, same bits as forward(). Any thread; `packed` must not change during the call.
  void forward_packed(const void* packed, const float* x, int64_t num_rows, float* y) const;

  /// K: columns of x (elements). Not valid on a moved-from Linear.
  int64_t in_features() const;
  /// N: columns of y (elements).
  int64_t out_features() const;
  /// The type the primitive computes in: kBF16 for bf16 weights when options.bf16_compute
  /// resolved to kBF16 and oneDNN has a bf16 matmul for this CPU; kF32 for f32 weights, and
  /// for bf16 weights computed in f32 (the fixed-order kernel widens them exactly in
  /// registers; the oneDNN tiles upcast them at construction; activations still rounded to
  /// bf16).
  LinearWeightType weight_type() const;
  /// True when the construction probe showed the small-M primitive bitwise equal to the tile
  /// primitive, so calls use it for small remainders (see the class comment). Always false
  /// for the fixed-order kernel (it has no tiles).
  bool small_m_path_enabled() const;
  /// The GEMM this Linear runs: kFixedOrder or kOneDnnTiles (never kAuto).
  LinearKernel kernel() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace muflow::kernels::cpu
