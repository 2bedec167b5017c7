#include "engine/model/npy.hpp"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_format.h"

namespace muflow::engine::model {

absl::Status write_npy_f32(const std::string& path, const std::vector<float>& data, int64_t rows,
                           int64_t cols) {
  if (static_cast<int64_t>(data.size()) != rows * cols) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "write_npy_f32(%s): %d values for shape [%d, %d]", path, data.size(), rows, cols));
  }
  // Header: magic, version 1.0, u16 header length, a Python dict literal padded with spaces
  // and ending in '\n' so that magic + 4 + header is a multiple of 64 (NumPy format spec).
  std::string dict = absl::StrFormat("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }",
                                     rows, cols);
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::ofstream out(path, std::ios::binary);
  if (!out) return absl::InternalError(absl::StrFormat("cannot open '%s' for writing", path));
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(dict.size());
  const char len_bytes[2] = {static_cast<char>(len & 0xFF), static_cast<char>(len >> 8)};
  out.write(len_bytes, 2);
  out.write(dict.data(), static_cast<std::streamsize>(dict.size()));
  out.write(reinterpret_cast<const char*>(data.data()),
            static_cast<std::streamsize>(data.size() * sizeof(float)));
  if (!out) return absl::InternalError(absl::StrFormat("failed writing '%s'", path));
  return absl::OkStatus();
}

}  // namespace muflow::engine::model
