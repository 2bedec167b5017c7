#pragma once
/// \file
/// How GEMMs on bf16 weights compute (issue #16, "compute dtype by ISA"). Where the CPU has
/// native bf16 dot products (AVX512-BF16 or AMX-BF16) a bf16 matmul runs at about twice the
/// f32 rate on half the bytes. Where it does not, oneDNN emulates bf16 (27 GFLOP/s measured
/// against 121 for f32 on the same weights, on an Intel Xeon with AVX-512 only), so the math is
/// f32: the fixed-order GEMM keeps the weights bf16 in memory and widens them to f32 exactly in
/// registers (half the bytes per token); the oneDNN fallback up-converts them once, at
/// construction (twice the memory). Activations are rounded
/// to bf16 on both paths, so every product is the same (bf16 x bf16 is exact in f32); only the
/// f32 accumulation order can differ. Batch invariance holds on both (kernels/cpu/linear.hpp).

#include <optional>
#include <string_view>

namespace muflow::kernels::cpu {

enum class Bf16Compute {
  kAuto,  ///< kBF16 where cpu_has_native_bf16(), else kF32
  kBF16,  ///< bf16 matmul (oneDNN emulates it without native bf16: slow, half the memory)
  kF32,   ///< f32 math on the weights' exact f32 values (see above), f32 matmul
};

/// True when oneDNN's effective ISA (dnnl::get_effective_cpu_isa(), which the environment
/// variable ONEDNN_MAX_CPU_ISA caps) has native bf16 dot products: avx512_core_bf16 or
/// avx512_core_amx. Computed once per process; any thread.
bool cpu_has_native_bf16();

/// `requested` with kAuto resolved for this CPU (kBF16 or kF32). Any thread.
Bf16Compute resolve_bf16_compute(Bf16Compute requested);

/// "auto", "bf16", "f32".
const char* bf16_compute_name(Bf16Compute compute);

/// The inverse of bf16_compute_name; nullopt for any other text.
std::optional<Bf16Compute> parse_bf16_compute(std::string_view name);

}  // namespace muflow::kernels::cpu
