#pragma once
/// \file
/// Device kinds for the sim backend (ARCHITECTURE.md §4): peak FLOP/s per precision, HBM
/// bandwidth and capacity, host and intra-node link bandwidths, a kernel launch overhead and
/// a default efficiency curve, each value with its datasheet citation in `source`.
///
/// The table is immutable after static initialisation; every function here may be called
/// from any thread.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/sim/precision.hpp"

namespace muflow::kernels::sim {

/// How much of the peak a kernel reaches, as a function of its batch size `n` (tokens):
///
///   eff(n) = e_max · n / (n + n_half)        (compute, fraction of peak FLOP/s)
///   mem_eff                                  (memory, fraction of HBM bytes/s)
///
/// With op flops F(n) = f·n the compute time F / (peak · eff(n)) = f·(n + n_half) /
/// (peak · e_max) is affine in n: `n_half` is the batch-independent part of a GEMM's cost in
/// units of tokens (tile padding, wave quantisation), `e_max` the large-batch efficiency.
/// This is the shape the measured V100 expert kernel shows (linear in tokens above ~40 tokens,
/// see cost_model.hpp). A plain value.
struct EfficiencyCurve {
  double e_max = 0.75;    ///< large-batch fraction of peak FLOP/s, in (0, 1]
  double n_half = 16;     ///< tokens at which eff(n) = e_max / 2, >= 0
  double mem_eff = 0.85;  ///< achieved fraction of HBM bytes/s when streaming, in (0, 1]
};

/// One kind of device. All rates are per direction where a link is concerned. Plain value.
struct DeviceKind {
  std::string name;                  ///< e.g. "H100-SXM"; the key `find_device_kind` takes
  double peak_flops_f32 = 0;         ///< FLOP/s, non-tensor FP32 (CUDA cores / CPU FMA units)
  double peak_flops_tf32 = 0;        ///< FLOP/s, dense tensor-core TF32 (see `peak_flops`)
  double peak_flops_f16 = 0;         ///< FLOP/s, dense tensor-core FP16 (FP32 accumulate)
  double peak_flops_bf16 = 0;        ///< FLOP/s, dense tensor-core BF16 (FP32 accumulate)
  double hbm_bytes_per_s = 0;        ///< device memory bandwidth, bytes/s
  int64_t memory_bytes = 0;          ///< device memory capacity as the datasheet states it
                                     ///< (10^9 bytes per GB), bytes
  int pcie_gen = 0;                  ///< host link PCIe generation (x16); 0 = host memory itself
  double host_link_bytes_per_s = 0;  ///< host <-> device, per direction, bytes/s
  double intra_node_link_bytes_per_s = 0;  ///< NVLink/NVSwitch per GPU, per direction, bytes/s
  double launch_overhead_s = 0;            ///< fixed cost of one kernel launch, seconds
  EfficiencyCurve efficiency;              ///< default curve (rationale in device_kind.cpp)
  std::string source;                      ///< citation of the values above

  /// Peak FLOP/s of `p`. A device without tensor-core support for `p` (V100: TF32, BF16; cpu:
  /// TF32, F16) falls back to the rate it really runs such a GEMM at, which the table stores
  /// in the same field (so every field is positive). FLOP/s.
  double peak_flops(Precision p) const;
};

/// The built-in kinds, by exact (case-sensitive) name: "H100-SXM", "H200", "A100-80GB",
/// "A100-40GB", "V100-32GB", "cpu". Errors: NotFound naming the known kinds.
absl::StatusOr<DeviceKind> find_device_kind(std::string_view name);

/// Names of all built-in kinds, in table order (newest GPU first, "cpu" last).
std::vector<std::string> device_kind_names();

/// All built-in kinds, in table order.
const std::vector<DeviceKind>& device_kinds();

}  // namespace muflow::kernels::sim
