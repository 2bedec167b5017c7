#pragma once
/// \file
/// For fuzz targets whose parser reads a file: writes one fuzz input to a path private to
/// this process, rewritten on every call. Fuzz targets only (aborts when the file cannot be
/// written, which is a broken machine, not a finding).

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace muflow::fuzz {

/// A folder under the system temp dir owned by this process (created on first use, never
/// removed: libFuzzer exits through _exit on a crash).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d = std::filesystem::temp_directory_path() /
                              ("muflow-fuzz-" + std::to_string(static_cast<long>(getpid())));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

/// Writes `size` bytes at `data` to `scratch_dir()/name` and returns that path.
inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = (scratch_dir() / name).string();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || (size > 0 && std::fwrite(data, 1, size, f) != size) ||
      std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
  return path;
}

}  // namespace muflow::fuzz
