#pragma once
/// \file
/// Batch-invariant dense layer on oneDNN matmul with prepacked weights.

#include <cstdint>
#include <memory>

namespace muflow::kernels::cpu {

/// Row tile of every GEMM call (rows of x per oneDNN primitive execution). All calls use
/// the same primitive shape `[kLinearMTile, in] x [in, out]`, so a row's reduction order
/// never depends on how many rows share its batch (batch invariance; the last tile is
/// zero-padded). See bench/linear_bench.cpp for what this costs versus per-M primitives.
inline constexpr int64_t kLinearMTile = 16;

/// Weight element type accepted by Linear.
enum class LinearWeightType { kF32, kBF16 };

/// y[m, out] = x[m, in] · Wᵀ (+ bias), W stored as HF does: `[out, in]` row-major.
///
/// Weights are reordered once, at construction, into the layout oneDNN's matmul primitive
/// prefers (prepacked). With kBF16 weights the activations are rounded to bf16 and the
/// matmul accumulates in f32 (AMX / AVX512-BF16 when the CPU has them; oneDNN's reference
/// path otherwise); outputs are f32.
///
/// Thread safety: construct on any thread; `forward` is const and may be called
/// concurrently from any number of threads (each call uses its own scratchpad). oneDNN
/// runs single-threaded inside a call (each muflow device is one executor thread): the call
/// sets the calling thread's OpenMP thread count to 1 for its duration and restores it.
/// Cost: a call of M rows runs ceil(M / kLinearMTile) full tiles (M = 1 costs as much as
/// M = kLinearMTile); numbers in bench/README.md and kernels/README.md.
/// Errors: dims ≤ 0 or a null weight pointer abort through the project assert.
class Linear {
 public:
  /// f32 weights `[out, in]`; `bias` `[out]` or nullptr. Copies what it needs.
  Linear(const float* weight, int64_t out_features, int64_t in_features, const float* bias);
  /// bf16 weights (raw bits) `[out, in]`; `bias` `[out]` f32 or nullptr.
  Linear(const uint16_t* weight_bf16, int64_t out_features, int64_t in_features,
         const float* bias);
  ~Linear();
  Linear(Linear&&) noexcept;
  Linear& operator=(Linear&&) noexcept;
  Linear(const Linear&) = delete;
  Linear& operator=(const Linear&) = delete;

  /// Computes `num_rows` rows. `x`: [num_rows, in] f32; `y`: [num_rows, out] f32 (written).
  /// num_rows == 0 is a no-op. x and y must not overlap.
  void forward(const float* x, int64_t num_rows, float* y) const;

  /// K: columns of x (elements). Not valid on a moved-from Linear.
  int64_t in_features() const;
  /// N: columns of y (elements).
  int64_t out_features() const;
  /// The type the primitive computes in: kBF16 for bf16 weights when oneDNN has a bf16
  /// matmul for this CPU; kF32 for f32 weights, and for bf16 weights on the fallback path
  /// (weights upcast to f32 exactly at construction, activations still rounded to bf16).
  LinearWeightType weight_type() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace muflow::kernels::cpu
