#include "kernels/cuda/device_info.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>

#include "kernels/cuda/gemm.hpp"

namespace muflow::kernels::cuda {

int device_count(std::string* why_none) {
  int count = 0;  // left untouched by a failing call
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    if (why_none != nullptr) *why_none = cudaGetErrorString(e);
    return 0;
  }
  if (count == 0 && why_none != nullptr) *why_none = "no CUDA device";
  return count;
}

std::string device_description(int gpu) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, gpu) != cudaSuccess) return "";
  char mem[32];
  std::snprintf(mem, sizeof(mem), "%.1f", static_cast<double>(p.totalGlobalMem) / (1 << 30));
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         std::to_string(p.multiProcessorCount) + " SMs, " + mem + " GiB)";
}

std::string unsupported_reason(int gpu) {
  cudaDeviceProp p{};
  if (cudaError_t e = cudaGetDeviceProperties(&p, gpu); e != cudaSuccess) {
    return std::string("cannot read its properties: ") + cudaGetErrorString(e);
  }
  if (p.major < 8) {
    return std::string(p.name) + " is sm_" + std::to_string(p.major) + std::to_string(p.minor) +
           "; muflow's kernels need sm_80 or newer";
  }
  int optin = 0;
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, gpu);
  if (static_cast<std::size_t>(optin) < gemm_shared_bytes()) {
    return std::string(p.name) + " allows " + std::to_string(optin) +
           " bytes of shared memory per block; muflow's bf16 GEMMs need " +
           std::to_string(gemm_shared_bytes()) + " (H100, H200, A100)";
  }
  return "";
}

std::string sim_device_kind(int gpu) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, gpu) != cudaSuccess) return "H100-SXM";
  const std::string name = p.name;
  if (name.find("H200") != std::string::npos) return "H200";
  if (name.find("H100") != std::string::npos) return "H100-SXM";
  if (name.find("A100") != std::string::npos) {
    return p.totalGlobalMem > (size_t{60} << 30) ? "A100-80GB" : "A100-40GB";
  }
  if (name.find("V100") != std::string::npos) return "V100-32GB";
  if (p.major == 8) return "A100-80GB";
  if (p.major == 7) return "V100-32GB";
  return "H100-SXM";
}

}  // namespace muflow::kernels::cuda
