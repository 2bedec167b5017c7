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
/// runs single-threaded inside a call (each muflow device is one executor thread).
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
  /// num_rows == 0 is a no-op.
  void forward(const float* x, int64_t num_rows, float* y) const;

  int64_t in_features() const;
  int64_t out_features() const;
  LinearWeightType weight_type() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace muflow::kernels::cpu
