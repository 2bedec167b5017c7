#pragma once
/// \file
/// CUDA runtime errors in the kernels' host wrappers. A launch that fails is a broken
/// precondition (bad sizes, a kernel built for another architecture) and aborts through
/// MUFLOW_ASSERT; what can fail at run time for a valid request (an allocation, no device)
/// is checked by the caller (engine/exec/cuda_model.hpp), which returns absl::Status.

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

/// Aborts with the CUDA error's name and the failing expression when `expr` is not
/// cudaSuccess. Any thread.
#define MUFLOW_CUDA_ASSERT(expr)                                                                   \
  do {                                                                                             \
    const cudaError_t muflow_cuda_err_ = (expr);                                                   \
    if (muflow_cuda_err_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "muflow: CUDA call failed at %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, \
                   #expr, cudaGetErrorName(muflow_cuda_err_),                                      \
                   cudaGetErrorString(muflow_cuda_err_));                                          \
      std::abort();                                                                                \
    }                                                                                              \
  } while (0)

/// After a kernel launch: the launch's configuration error, if any (asynchronous execution
/// errors surface at the next synchronizing call).
#define MUFLOW_CUDA_LAUNCH_CHECK() MUFLOW_CUDA_ASSERT(cudaGetLastError())
