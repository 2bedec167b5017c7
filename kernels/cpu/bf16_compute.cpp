#include "kernels/cpu/bf16_compute.hpp"

#include <oneapi/dnnl/dnnl.hpp>

namespace muflow::kernels::cpu {

bool cpu_has_native_bf16() {
  static const bool native = [] {
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  }();
  return native;
}

Bf16Compute resolve_bf16_compute(Bf16Compute requested) {
  if (requested != Bf16Compute::kAuto) return requested;
  return cpu_has_native_bf16() ? Bf16Compute::kBF16 : Bf16Compute::kF32;
}

const char* bf16_compute_name(Bf16Compute compute) {
  switch (compute) {
    case Bf16Compute::kAuto:
      return "auto";
    case Bf16Compute::kBF16:
      return "bf16";
    case Bf16Compute::kF32:
      return "f32";
  }
  return "auto";
}

std::optional<Bf16Compute> parse_bf16_compute(std::string_view name) {
  for (Bf16Compute c : {Bf16Compute::kAuto, Bf16Compute::kBF16, Bf16Compute::kF32}) {
    if (name == bf16_compute_name(c)) return c;
  }
  return std::nullopt;
}

}  // namespace muflow::kernels::cpu
