#pragma once
/// \file
/// Which GPUs this process sees, without aborting where there is none.

#include <string>

namespace muflow::kernels::cuda {

/// Number of CUDA devices; 0 where the driver is missing or finds none (cudaGetDeviceCount
/// then fails with cudaErrorInsufficientDriver or cudaErrorNoDevice). `why_none` (may be
/// null) receives the runtime's reason when 0. Any thread.
int device_count(std::string* why_none = nullptr);

/// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)" for device `gpu`; "" if unknown.
std::string device_description(int gpu);

/// Why GPU `gpu` cannot run this build's kernels, or "" when it can: compute capability 8.0 or
/// newer (the kernels are built for sm_80 and sm_90: cp.async, bf16 MMA) and enough opt-in
/// shared memory per block for the bf16 GEMMs (kernels/cuda/gemm.hpp).
std::string unsupported_reason(int gpu);

/// The sim device kind (kernels/sim/device_kind.hpp) with the datasheet rates of GPU `gpu`:
/// by its name ("H200", "H100" → "H100-SXM", "A100" → "A100-80GB" or "A100-40GB" by memory,
/// "V100" → "V100-32GB"), else by compute capability (9.x → "H100-SXM", 8.x → "A100-80GB",
/// 7.x → "V100-32GB"); "H100-SXM" when neither tells. Used where a planner needs rates
/// (HarMoEny's Eq. 4) and as the kind a GPU calibration describes.
std::string sim_device_kind(int gpu);

}  // namespace muflow::kernels::cuda
