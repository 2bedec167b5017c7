#pragma once
/// \file
/// SwiGLU expert FFN (Shazeer 2020) as in Mixtral/Qwen2-MoE experts.

#include <cstddef>
#include <cstdint>
#include <optional>

#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/linear.hpp"

namespace muflow::kernels::cpu {

/// y = down( silu(x·gateᵀ) ⊙ (x·upᵀ) ), silu(z) = z / (1 + e^{-z}).
///
/// gate and up are fused into one prepacked `[2·ffn, hidden]` Linear (one GEMM), down is
/// `[hidden, ffn]`. Batch invariant (see Linear). Const methods are safe from any thread.
class ExpertFfn {
 public:
  /// f32 weights: gate, up `[ffn, hidden]`, down `[hidden, ffn]`; `kernel`: the GEMM
  /// (LinearOptions::kernel).
  ExpertFfn(const float* gate, const float* up, const float* down, int64_t hidden, int64_t ffn,
            LinearKernel kernel = LinearKernel::kAuto);
  /// bf16 weights (raw bits), same shapes; `compute`: bf16 or f32 GEMMs (bf16_compute.hpp).
  ExpertFfn(const uint16_t* gate, const uint16_t* up, const uint16_t* down, int64_t hidden,
            int64_t ffn, Bf16Compute compute = Bf16Compute::kAuto,
            LinearKernel kernel = LinearKernel::kAuto);

  /// The type both GEMMs compute in (Linear::weight_type).
  LinearWeightType compute_type() const { return gate_up_.weight_type(); }
  /// The GEMM both Linears run (Linear::kernel).
  LinearKernel kernel() const { return gate_up_.kernel(); }

  /// x: [num_rows, hidden] f32; y: [num_rows, hidden] f32 (written). num_rows may be 0.
  /// x and y must not overlap. Works in row chunks through per-thread buffers.
  void forward(const float* x, int64_t num_rows, float* y) const;

  /// Bytes of this expert's prepacked weights as one block (gate|up, then down at the next
  /// 64-byte boundary): what a weight copy into an expert slot moves (HarMoEny §4.3).
  std::size_t packed_bytes() const;
  /// Copies the prepacked weights into `dst` (packed_bytes() bytes, 64-byte aligned). Any
  /// thread (reads only this expert's immutable weights).
  void copy_packed(void* dst) const;
  /// forward() with the weights read from `packed`, a copy made by copy_packed (nullptr: this
  /// expert's own). Bitwise the same rows as forward().
  void forward_packed(const void* packed, const float* x, int64_t num_rows, float* y) const;

  /// Model width (elements per row of x and y).
  int64_t hidden() const { return hidden_; }
  /// Expert intermediate width (rows of gate and up).
  int64_t ffn() const { return ffn_; }

 private:
  int64_t hidden_, ffn_;
  Linear gate_up_;
  Linear down_;
};

/// silu(gate) ⊙ up for a fused [num_rows, 2·ffn] f32 buffer (gate in the first ffn columns);
/// writes [num_rows, ffn] f32 to `out`: out = (g / (1 + fast_exp(-g))) · up per element
/// (kernels/cpu/fast_exp.hpp, not libm's expf), 16 elements at a time where the CPU has
/// AVX-512F, 8 with AVX2 and FMA, bitwise equal to swiglu_generic (`isa`: the vector path to
/// run; nullopt: the widest the CPU has; one it lacks aborts). Rows are split over the calling
/// thread's GEMM threads (gemm_threads()) when there are enough of them; element-wise, so no
/// split changes a bit. Any thread.
void swiglu(const float* gate_up, int64_t num_rows, int64_t ffn, float* out,
            std::optional<VectorIsa> isa = std::nullopt);

/// swiglu one element at a time on the calling thread (its scalar form; tests compare them).
void swiglu_generic(const float* gate_up, int64_t num_rows, int64_t ffn, float* out);

}  // namespace muflow::kernels::cpu
