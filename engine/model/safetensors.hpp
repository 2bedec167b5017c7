#pragma once
/// \file
/// Reading and writing the safetensors file format.
///
/// Spec (huggingface/safetensors, "Format"): an 8-byte little-endian u64 `N`, then `N` bytes
/// of UTF-8 JSON `{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
/// {string: string}}`, then the byte buffer. Offsets are bytes relative to the buffer start.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/weight_tensor.hpp"

namespace muflow::engine::model {

/// One tensor's header entry, as validated by `open_safetensors`.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;            ///< safetensors spelling: "F32", "BF16", "F16", "I64", ...
  std::vector<int64_t> shape;   ///< may be empty for a scalar
  uint64_t begin = 0;           ///< byte offset of the first element in the buffer
  uint64_t end = 0;             ///< one past the last byte; end - begin = numel × dtype size
};

/// A safetensors file opened read-only (memory-mapped).
///
/// Movable, not copyable. Immutable after `open_safetensors`, so its const methods may be
/// called from any thread concurrently. The mapping lives as long as the object.
class SafetensorsFile {
 public:
  SafetensorsFile() = default;

  /// The path given to `open_safetensors` (used as the prefix of every error message).
  const std::string& path() const { return path_; }
  /// The optional `__metadata__` map (HF writes {"format": "pt"}).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// All tensor entries by name (sorted by name).
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  /// True when the header declares a tensor of this name.
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }

  /// Copies one tensor into host memory, keeping its dtype (F32 → `f32`, BF16 → `bf16`).
  /// `WeightTensor::name` is set to `name`.
  /// Errors: NotFound "<path>: tensor '<name>' not found"; InvalidArgument
  /// "<path>: tensor '<name>' has dtype F16; dtype F16 not supported; expected F32 or BF16".
  absl::StatusOr<WeightTensor> read_tensor(const std::string& name) const;

 private:
  friend absl::StatusOr<SafetensorsFile> open_safetensors(const std::string& path);

  std::string path_;
  std::shared_ptr<const void> mapping_;  ///< keeps the mmap alive; unmaps on release
  const uint8_t* buffer_ = nullptr;      ///< start of the byte buffer (after the header)
  uint64_t buffer_size_ = 0;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, SafetensorsEntry> entries_;
};

/// Bytes per element of a safetensors dtype name, or 0 when the name is not a dtype of the
/// spec (F64 F32 F16 BF16 I64 I32 I16 I8 U64 U32 U16 U8 BOOL F8_E4M3 F8_E5M2).
int64_t safetensors_dtype_size(const std::string& dtype);

/// Opens and validates a safetensors file: header length within the file, the header is a
/// JSON object, every entry has a known dtype, a non-negative integer shape and
/// `data_offsets` inside the buffer whose size equals numel × dtype size, and no two
/// tensors overlap. Dtypes other than F32/BF16 are accepted here and rejected by
/// `read_tensor`, so a file may carry tensors the engine never reads.
/// Errors (all prefixed with `path`): NotFound when the file does not exist;
/// InvalidArgument/DataLoss for every violation above (e.g. a truncated file reads
/// "<path>: tensor 'x' data_offsets [a,b] exceed the data buffer of N bytes (file truncated?)").
absl::StatusOr<SafetensorsFile> open_safetensors(const std::string& path);

/// Writes `tensors` (in the given order, packed without gaps) and `metadata` to `path`.
/// The header JSON is padded with spaces to a multiple of 8 bytes, as HF does. The file is
/// written to `<path>.tmp` and renamed, so a failed write leaves no partial file at `path`.
/// Errors: InvalidArgument for an empty or duplicate name, the reserved name "__metadata__",
/// a tensor with no shape, or element storage whose size differs from numel();
/// Internal/Unavailable-like errors naming the path when the file cannot be written.
absl::Status write_safetensors(const std::string& path,
                               const std::vector<const WeightTensor*>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

}  // namespace muflow::engine::model
