#pragma once
// What the gpu tests share: skipping where no GPU is found, and host <-> device copies.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/device_info.hpp"

namespace muflow::testing {

/// GTEST_SKIP()s the calling test where this process sees no CUDA device, naming why.
#define MUFLOW_REQUIRE_GPU()                                                      \
  do {                                                                            \
    std::string muflow_why_;                                                      \
    if (::muflow::kernels::cuda::device_count(&muflow_why_) == 0) {               \
      GTEST_SKIP() << "no CUDA device (" << muflow_why_ << "): GPU test skipped"; \
    }                                                                             \
  } while (0)

/// A device copy of `v`.
template <typename T>
kernels::cuda::DeviceBuffer upload(const std::vector<T>& v) {
  kernels::cuda::DeviceBuffer b;
  EXPECT_EQ(b.allocate(v.size() * sizeof(T)), cudaSuccess);
  if (!v.empty()) {
    EXPECT_EQ(cudaMemcpy(b.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  return b;
}

/// `count` values of a device buffer, after the device finished its work.
template <typename T>
std::vector<T> download(const kernels::cuda::DeviceBuffer& b, size_t count) {
  std::vector<T> v(count);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  if (count > 0) {
    EXPECT_EQ(cudaMemcpy(v.data(), b.get(), count * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
  }
  return v;
}

/// A zeroed device buffer of `count` values of T.
template <typename T>
kernels::cuda::DeviceBuffer zeros(size_t count) {
  kernels::cuda::DeviceBuffer b;
  EXPECT_EQ(b.allocate(count * sizeof(T)), cudaSuccess);
  if (count > 0) {
    EXPECT_EQ(cudaMemset(b.get(), 0, count * sizeof(T)), cudaSuccess);
  }
  return b;
}

}  // namespace muflow::testing
