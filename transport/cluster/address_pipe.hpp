#pragma once
/// \file
/// Hands a UCX worker address (or any blob up to 1 MiB) between a process and a child it
/// spawned, over a pipe: a 4-byte native-endian length, then the bytes. For local two-process
/// setups without a control plane (tests, `bench/data_plane_throughput`).

#include <unistd.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace muflow::transport::cluster {

namespace detail {
inline bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t k = ::write(fd, c, n);
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}
inline bool read_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t k = ::read(fd, c, n);
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}
}  // namespace detail

/// Writes `blob` to `fd`; false when the pipe closed or failed.
inline bool write_blob(int fd, const std::vector<char>& blob) {
  const auto n = static_cast<uint32_t>(blob.size());
  return detail::write_all(fd, &n, sizeof n) && detail::write_all(fd, blob.data(), blob.size());
}

/// Reads one blob from `fd`; nullopt when the pipe closed, failed, or announced more than
/// 1 MiB (bounded before allocating).
inline std::optional<std::vector<char>> read_blob(int fd) {
  uint32_t n = 0;
  if (!detail::read_all(fd, &n, sizeof n) || n > (1u << 20)) return std::nullopt;
  std::vector<char> blob(n);
  if (!detail::read_all(fd, blob.data(), n)) return std::nullopt;
  return blob;
}

}  // namespace muflow::transport::cluster
