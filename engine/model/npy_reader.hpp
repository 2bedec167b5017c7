#pragma once
/// \file
/// Reading NumPy `.npy` int64 arrays (format version 1.0, little-endian `<i8`, C order), as
/// used by the routing traces in `../shared/data/routing/`. The format is NumPy's NEP 1
/// ("A simple file format for NumPy arrays"): 6-byte magic `\x93NUMPY`, major/minor version
/// bytes, a little-endian uint16 header length, an ASCII Python-dict header padded with
/// spaces and ending in '\n', then the raw data.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace muflow::engine::model {

/// An int64 array read from a `.npy` file. Value type, owned by the caller.
struct NpyInt64Array {
  std::vector<int64_t> shape;  ///< e.g. {40800, 6}; {} for a 0-d array
  std::vector<int64_t> data;   ///< row-major (C order), product(shape) values

  /// Number of values (product of `shape`; 1 for a 0-d array).
  int64_t num_values() const { return static_cast<int64_t>(data.size()); }
};

/// Reads a version 1.0 `.npy` file holding a little-endian int64 (`'<i8'`) C-order array.
///
/// Checks the magic, the version (1.0 only), that the header is a dict with exactly the keys
/// `descr`, `fortran_order` and `shape`, that `descr` is `'<i8'`, that `fortran_order` is
/// False, that the shape's dims are non-negative, and that the file holds exactly
/// product(shape) · 8 data bytes.
/// Errors (every message starts with `path: `): NotFound when the file cannot be opened;
/// InvalidArgument for a bad magic, another version, a malformed header, another dtype
/// (message names it, e.g. `dtype '<f4' not supported; expected '<i8'`), Fortran order, or a
/// data size that does not match the shape (truncated or trailing bytes).
/// Thread-safe (no shared state); reads the whole file into memory.
absl::StatusOr<NpyInt64Array> read_npy_i64(const std::string& path);

}  // namespace muflow::engine::model
