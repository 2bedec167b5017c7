#pragma once
/// \file
/// An owned device allocation (cudaMalloc / cudaFree), movable, not copyable.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

namespace muflow::kernels::cuda {

/// Bytes on one GPU. `allocate` returns the CUDA error instead of aborting (out of memory is
/// a run-time condition the caller reports). The buffer frees itself on the device it was
/// allocated on. Not thread-safe; owned by one executor or one model.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      device_ = o.device_;
    }
    return *this;
  }
  ~DeviceBuffer() { reset(); }

  /// Frees what is held, then allocates `bytes` on the current device (0 bytes: holds
  /// nothing). Errors: cudaMalloc's (cudaErrorMemoryAllocation, ...); the buffer is then empty.
  cudaError_t allocate(std::size_t bytes) {
    reset();
    if (bytes == 0) return cudaSuccess;
    if (cudaError_t e = cudaGetDevice(&device_); e != cudaSuccess) return e;
    void* p = nullptr;
    if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) return e;
    ptr_ = p;
    bytes_ = bytes;
    return cudaSuccess;
  }
  /// Grows to at least `bytes` (contents are not kept); no-op when large enough.
  cudaError_t reserve(std::size_t bytes) { return bytes <= bytes_ ? cudaSuccess : allocate(bytes); }
  void reset() {
    if (ptr_ != nullptr) {
      int current = 0;
      cudaGetDevice(&current);
      if (current != device_) cudaSetDevice(device_);
      cudaFree(ptr_);
      if (current != device_) cudaSetDevice(current);
    }
    ptr_ = nullptr;
    bytes_ = 0;
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = 0;
};

}  // namespace muflow::kernels::cuda
