#pragma once
/// \file
/// What the CPU running this process can execute, for kernels that carry AVX-512 or AVX2 paths
/// next to a portable one (the project builds for baseline x86-64: kernels/README.md). Each
/// answer is read once per process from CPUID (GCC/Clang's __builtin_cpu_supports); any thread.

#include <optional>

/// Compiles one function for AVX-512F; call it only where cpu_has_avx512f() is true.
#define MUFLOW_TARGET_AVX512 __attribute__((target("avx512f")))
/// Compiles one function for AVX2 with FMA; call it only where cpu_has_avx2_fma() is true.
#define MUFLOW_TARGET_AVX2 __attribute__((target("avx2,fma")))
/// Compiles one function for AVX-512F with AVX512-BF16; call it only where
/// cpu_has_avx512_bf16() is true.
#define MUFLOW_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bf16")))

namespace muflow::kernels::cpu {

/// True when the CPU has AVX-512F (the 16-float vector paths).
inline bool cpu_has_avx512f() {
  static const bool has = __builtin_cpu_supports("avx512f") != 0;
  return has;
}

/// True when the CPU has AVX2 and FMA (the 8-float vector paths with fused multiply-add).
inline bool cpu_has_avx2_fma() {
  static const bool has = __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
  return has;
}

/// Vector ISAs of the kernels' f32 paths. Each path gives the bits of its kernel's scalar form
/// (the same operations in the same order per lane), so the ISA changes speed only.
enum class VectorIsa {
  kAvx512,  ///< AVX-512F: 16 f32 per register
  kAvx2,    ///< AVX2 and FMA: 8 f32 per register
};

/// Whether this CPU runs `isa`'s paths.
inline bool cpu_has_isa(VectorIsa isa) {
  return isa == VectorIsa::kAvx512 ? cpu_has_avx512f() : cpu_has_avx2_fma();
}

/// The widest vector ISA this CPU runs (AVX-512F before AVX2+FMA), or nullopt for neither.
inline std::optional<VectorIsa> widest_vector_isa() {
  if (cpu_has_isa(VectorIsa::kAvx512)) return VectorIsa::kAvx512;
  if (cpu_has_isa(VectorIsa::kAvx2)) return VectorIsa::kAvx2;
  return std::nullopt;
}

/// "avx512" or "avx2".
inline const char* vector_isa_name(VectorIsa isa) {
  return isa == VectorIsa::kAvx512 ? "avx512" : "avx2";
}

/// True when the CPU has AVX-512F and AVX512-BF16 (vdpbf16ps).
inline bool cpu_has_avx512_bf16() {
  static const bool has = cpu_has_avx512f() && __builtin_cpu_supports("avx512bf16") != 0;
  return has;
}

}  // namespace muflow::kernels::cpu
