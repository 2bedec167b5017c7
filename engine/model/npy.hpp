#pragma once
/// \file
/// Writing NumPy `.npy` files (format version 1.0, little-endian float32, C order).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace muflow::engine::model {

/// Writes `data` (row-major, `rows * cols` floats) as a `[rows, cols]` `<f4` array, creating
/// missing parent folders.
/// Errors: InvalidArgument when data.size() != rows * cols; Internal naming the path when the
/// file cannot be written.
absl::Status write_npy_f32(const std::string& path, const std::vector<float>& data, int64_t rows,
                           int64_t cols);

}  // namespace muflow::engine::model
