#include "kernels/sim/device_kind.hpp"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace muflow::kernels::sim {
namespace {

// Conventions for the table below.
// - Peak FLOP/s are NVIDIA's *dense* figures. Hopper and Ampere datasheets print tensor-core
//   rates "with sparsity" (2:4); the dense rate is half of that and is what a MoE GEMM gets.
// - Link figures in datasheets are bidirectional totals; the table stores one direction
//   (half), which is what a port of the sim network model carries.
// - GB = 10^9 bytes, TB/s = 10^12 bytes/s, as the datasheets use them.
//
// Default efficiency curves (EfficiencyCurve), rationale:
// - e_max 0.75 on GPUs: large cuBLAS GEMMs reach roughly 70-85 % of the dense datasheet peak
//   (clocks under power limits, epilogues); the one measured kernel we have, the Switch expert
//   FFN in FP32 on a V100 (../shared/data/kernels/v100-switch-expert-time-vs-tokens.csv), fits
//   e_max = 0.84 (cost_model.hpp), so V100 gets 0.8.
// - n_half 16 tokens on GPUs: a tensor-core MMA tile spans 16 rows (mma.m16n8k16), so a batch
//   below 16 tokens pays for a partly empty tile; larger batches amortise it. Small batches
//   are memory-bound anyway (the roofline's max), so n_half mainly smooths the knee.
// - mem_eff 0.85: streaming kernels reach roughly 80-90 % of datasheet HBM bandwidth.
// - launch_overhead_s 4 us (5 us on V100): the order of a CUDA kernel launch plus dispatch
//   from a C++ host loop; an eager-PyTorch engine pays far more (the V100 CSV fits ~57 us per
//   kernel, cost_model.hpp), which is what `CostModel::calibrate_expert_ffn` is for.
const std::vector<DeviceKind>& table() {
  static const std::vector<DeviceKind> kinds = {
      {
          .name = "H100-SXM",
          .peak_flops_f32 = 67e12,
          .peak_flops_tf32 = 494.5e12,
          .peak_flops_f16 = 989.5e12,
          .peak_flops_bf16 = 989.5e12,
          .hbm_bytes_per_s = 3.35e12,
          .memory_bytes = 80'000'000'000,
          .pcie_gen = 5,
          .host_link_bytes_per_s = 64e9,
          .intra_node_link_bytes_per_s = 450e9,
          .launch_overhead_s = 4e-6,
          .efficiency = {.e_max = 0.75, .n_half = 16, .mem_eff = 0.85},
          .source = "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 SXM column: FP32 67 "
                    "TFLOP/s; TF32 989, BF16/FP16 1,979 TFLOP/s with sparsity (dense: half); "
                    "80 GB HBM3 at 3.35 TB/s; NVLink 900 GB/s; PCIe Gen5 128 GB/s "
                    "(bidirectional; per direction: half)",
      },
      {
          .name = "H200",
          .peak_flops_f32 = 67e12,
          .peak_flops_tf32 = 494.5e12,
          .peak_flops_f16 = 989.5e12,
          .peak_flops_bf16 = 989.5e12,
          .hbm_bytes_per_s = 4.8e12,
          .memory_bytes = 141'000'000'000,
          .pcie_gen = 5,
          .host_link_bytes_per_s = 64e9,
          .intra_node_link_bytes_per_s = 450e9,
          .launch_overhead_s = 4e-6,
          .efficiency = {.e_max = 0.75, .n_half = 16, .mem_eff = 0.85},
          .source = "NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM column: FP32 67 "
                    "TFLOP/s; TF32 989, BF16/FP16 1,979 TFLOP/s with sparsity (dense: half); "
                    "141 GB HBM3e at 4.8 TB/s; NVLink 900 GB/s; PCIe Gen5 128 GB/s "
                    "(bidirectional; per direction: half)",
      },
      {
          .name = "A100-80GB",
          .peak_flops_f32 = 19.5e12,
          .peak_flops_tf32 = 156e12,
          .peak_flops_f16 = 312e12,
          .peak_flops_bf16 = 312e12,
          .hbm_bytes_per_s = 2.039e12,
          .memory_bytes = 80'000'000'000,
          .pcie_gen = 4,
          .host_link_bytes_per_s = 32e9,
          .intra_node_link_bytes_per_s = 300e9,
          .launch_overhead_s = 4e-6,
          .efficiency = {.e_max = 0.75, .n_half = 16, .mem_eff = 0.85},
          .source = "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 80GB SXM column: FP32 "
                    "19.5 TFLOP/s; TF32 156, BF16/FP16 312 TFLOP/s dense; 80 GB HBM2e at "
                    "2,039 GB/s; NVLink 600 GB/s; PCIe Gen4 64 GB/s (bidirectional; per "
                    "direction: half)",
      },
      {
          .name = "A100-40GB",
          .peak_flops_f32 = 19.5e12,
          .peak_flops_tf32 = 156e12,
          .peak_flops_f16 = 312e12,
          .peak_flops_bf16 = 312e12,
          .hbm_bytes_per_s = 1.555e12,
          .memory_bytes = 40'000'000'000,
          .pcie_gen = 4,
          .host_link_bytes_per_s = 32e9,
          .intra_node_link_bytes_per_s = 300e9,
          .launch_overhead_s = 4e-6,
          .efficiency = {.e_max = 0.75, .n_half = 16, .mem_eff = 0.85},
          .source = "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 40GB SXM column: FP32 "
                    "19.5 TFLOP/s; TF32 156, BF16/FP16 312 TFLOP/s dense; 40 GB HBM2 at "
                    "1,555 GB/s; NVLink 600 GB/s; PCIe Gen4 64 GB/s (bidirectional; per "
                    "direction: half)",
      },
      {
          .name = "V100-32GB",
          .peak_flops_f32 = 15.7e12,
          // Volta has no TF32 or BF16 tensor cores: such GEMMs run on the FP32 pipes.
          .peak_flops_tf32 = 15.7e12,
          .peak_flops_f16 = 125e12,
          .peak_flops_bf16 = 15.7e12,
          .hbm_bytes_per_s = 900e9,
          .memory_bytes = 32'000'000'000,
          .pcie_gen = 3,
          .host_link_bytes_per_s = 16e9,
          .intra_node_link_bytes_per_s = 150e9,
          .launch_overhead_s = 5e-6,
          .efficiency = {.e_max = 0.8, .n_half = 16, .mem_eff = 0.85},
          .source = "NVIDIA Tesla V100 datasheet (2020), V100 SXM2 column: FP32 15.7 TFLOP/s, "
                    "Tensor (FP16) 125 TFLOP/s, no TF32/BF16 tensor cores (FP32 rate used); "
                    "32 GB HBM2 at 900 GB/s; NVLink 300 GB/s; PCIe Gen3 32 GB/s "
                    "(bidirectional; per direction: half)",
      },
      {
          // One core of the project's 2-core dev VM (AMD EPYC, Zen 4, AVX-512 + AVX512-BF16),
          // i.e. one cpu-backend device running oneDNN single-threaded. Measured, not a
          // datasheet: e_max near 1 because the peaks already are achieved rates.
          .name = "cpu",
          .peak_flops_f32 = 0.1e12,
          .peak_flops_tf32 = 0.1e12,
          .peak_flops_f16 = 0.1e12,
          .peak_flops_bf16 = 0.22e12,
          .hbm_bytes_per_s = 19e9,
          .memory_bytes = 16'000'000'000,
          .pcie_gen = 0,
          .host_link_bytes_per_s = 19e9,
          .intra_node_link_bytes_per_s = 12e9,
          .launch_overhead_s = 2e-6,
          .efficiency = {.e_max = 0.9, .n_half = 8, .mem_eff = 1.0},
          .source = "measured on the dev VM, bench/README.md 'Small-M fast path' (1 thread, "
                    "oneDNN 2.6.3): Linear 1024->4096 at 16 rows 99 GFLOP/s f32, 224 GFLOP/s "
                    "bf16 (no TF32/F16 units: f32 rate); ExpertFfn f32 single row streams 48 "
                    "MiB of cold weights in 2.70 ms = 19 GB/s; host link = that memory rate; "
                    "intra-node = UCX shared memory ~12 GB/s (design/TOOLCHAIN.md); 16 GB of the "
                    "VM's 25 GB as capacity",
      },
  };
  return kinds;
}

}  // namespace

double DeviceKind::peak_flops(Precision p) const {
  switch (p) {
    case Precision::kF32:
      return peak_flops_f32;
    case Precision::kTF32:
      return peak_flops_tf32;
    case Precision::kF16:
      return peak_flops_f16;
    case Precision::kBF16:
      return peak_flops_bf16;
  }
  return peak_flops_f32;
}

const std::vector<DeviceKind>& device_kinds() { return table(); }

std::vector<std::string> device_kind_names() {
  std::vector<std::string> names;
  for (const DeviceKind& kind : table()) names.push_back(kind.name);
  return names;
}

absl::StatusOr<DeviceKind> find_device_kind(std::string_view name) {
  for (const DeviceKind& kind : table()) {
    if (kind.name == name) return kind;
  }
  return absl::NotFoundError(
      absl::StrCat("unknown device kind '", std::string(name),
                   "'; known kinds: ", absl::StrJoin(device_kind_names(), ", ")));
}

}  // namespace muflow::kernels::sim
