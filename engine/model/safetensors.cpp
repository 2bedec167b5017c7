#include "engine/model/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace muflow::engine::model {

static_assert(std::endian::native == std::endian::little,
              "safetensors is little-endian; this reader copies bytes as they are");

namespace {

using nlohmann::json;

constexpr uint64_t kPrefixBytes = 8;

std::string shape_string(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

std::string json_type(const json& j) { return j.type_name(); }

// Parses one header entry; every error names the file and the tensor.
absl::StatusOr<SafetensorsEntry> parse_entry(const std::string& path, const std::string& name,
                                             const json& j, uint64_t buffer_size) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", name, "': ", what));
  };
  if (!j.is_object()) return bad(absl::StrCat("header entry must be an object, got ", json_type(j)));
  SafetensorsEntry e;
  e.name = name;
  auto dtype = j.find("dtype");
  if (dtype == j.end() || !dtype->is_string()) return bad("key 'dtype' missing or not a string");
  e.dtype = dtype->get<std::string>();
  const int64_t elem = safetensors_dtype_size(e.dtype);
  if (elem == 0) return bad(absl::StrCat("unknown dtype '", e.dtype, "'"));
  auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_array()) return bad("key 'shape' missing or not an array");
  uint64_t numel = 1;
  for (const json& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return bad(absl::StrCat("shape ", shape->dump(), " must hold non-negative integers"));
    }
    const uint64_t dim = d.get<uint64_t>();
    if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / dim / 8) {
      return bad(absl::StrCat("shape ", shape->dump(), " is too large"));
    }
    numel *= dim;
    e.shape.push_back(static_cast<int64_t>(dim));
  }
  auto offsets = j.find("data_offsets");
  if (offsets == j.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    return bad("key 'data_offsets' missing or not two non-negative integers [begin, end]");
  }
  e.begin = (*offsets)[0].get<uint64_t>();
  e.end = (*offsets)[1].get<uint64_t>();
  if (e.begin > e.end) {
    return bad(absl::StrFormat("data_offsets [%d,%d] have begin > end", e.begin, e.end));
  }
  if (e.end > buffer_size) {
    return bad(absl::StrFormat(
        "data_offsets [%d,%d] exceed the data buffer of %d bytes (file truncated?)", e.begin,
        e.end, buffer_size));
  }
  const uint64_t expected = numel * static_cast<uint64_t>(elem);
  if (e.end - e.begin != expected) {
    return bad(absl::StrFormat(
        "data_offsets [%d,%d] span %d bytes, expected %d (%s shape %s, %d bytes per element)",
        e.begin, e.end, e.end - e.begin, expected, e.dtype, shape_string(e.shape), elem));
  }
  return e;
}

// Writes all of `data` to `f`; false on a short write.
bool write_all(std::FILE* f, const void* data, size_t size) {
  return size == 0 || std::fwrite(data, 1, size, f) == size;
}

}  // namespace

int64_t safetensors_dtype_size(const std::string& dtype) {
  static const std::map<std::string, int64_t> kSizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4},
      {"I16", 2}, {"I8", 1},  {"U64", 8}, {"U32", 4},  {"U16", 2}, {"U8", 1},
      {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = kSizes.find(dtype);
  return it == kSizes.end() ? 0 : it->second;
}

absl::StatusOr<SafetensorsFile> open_safetensors(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string msg = absl::StrCat(path, ": cannot open: ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(msg) : absl::PermissionDeniedError(msg);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < kPrefixBytes) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: file has %d bytes, shorter than the 8-byte header length prefix (truncated?)", path,
        file_size));
  }
  void* addr = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (addr == MAP_FAILED) {
    return absl::InternalError(absl::StrCat(path, ": mmap failed: ", std::strerror(errno)));
  }
  SafetensorsFile file;
  file.path_ = path;
  file.mapping_ = std::shared_ptr<const void>(
      addr, [file_size](const void* p) { ::munmap(const_cast<void*>(p), file_size); });
  const auto* bytes = static_cast<const uint8_t*>(addr);

  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, kPrefixBytes);
  if (header_len > file_size - kPrefixBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: header length %d exceeds the %d bytes after the length prefix (truncated or not a "
        "safetensors file)",
        path, header_len, file_size - kPrefixBytes));
  }
  file.buffer_ = bytes + kPrefixBytes + header_len;
  file.buffer_size_ = file_size - kPrefixBytes - header_len;

  json header;
  try {
    header = json::parse(bytes + kPrefixBytes, bytes + kPrefixBytes + header_len);
  } catch (const json::exception& ex) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": header is not valid JSON: ", ex.what()));
  }
  if (!header.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": header must be a JSON object, got ", json_type(header)));
  }
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": '__metadata__' must be an object of strings"));
      }
      for (const auto& [key, v] : value.items()) {
        if (!v.is_string()) {
          return absl::InvalidArgumentError(absl::StrCat(
              path, ": '__metadata__' key '", key, "' must be a string, got ", json_type(v)));
        }
        file.metadata_[key] = v.get<std::string>();
      }
      continue;
    }
    absl::StatusOr<SafetensorsEntry> entry = parse_entry(path, name, value, file.buffer_size_);
    if (!entry.ok()) return entry.status();
    auto [it, inserted] = file.entries_.emplace(name, *std::move(entry));
    by_offset.push_back(&it->second);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
              return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
            });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const SafetensorsEntry& prev = *by_offset[i - 1];
    const SafetensorsEntry& cur = *by_offset[i];
    if (cur.begin < prev.end) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' data_offsets [%d,%d] overlap tensor '%s' [%d,%d]", path, cur.name,
          cur.begin, cur.end, prev.name, prev.begin, prev.end));
    }
  }
  return file;
}

absl::StatusOr<WeightTensor> SafetensorsFile::read_tensor(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat(path_, ": tensor '", name, "' not found"));
  }
  const SafetensorsEntry& e = it->second;
  if (e.dtype != "F32" && e.dtype != "BF16") {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": tensor '", name, "' has dtype ",
                                                   e.dtype, "; dtype ", e.dtype,
                                                   " not supported; expected F32 or BF16"));
  }
  if (e.shape.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": tensor '", name, "' is a scalar (shape []); expected at least one dimension"));
  }
  WeightTensor t;
  t.name = name;
  t.shape = e.shape;
  const uint8_t* src = buffer_ + e.begin;
  const size_t bytes = e.end - e.begin;
  if (e.dtype == "F32") {
    t.dtype = DType::kF32;
    t.f32.resize(bytes / sizeof(float));
    if (bytes != 0) std::memcpy(t.f32.data(), src, bytes);
  } else {
    t.dtype = DType::kBF16;
    t.bf16.resize(bytes / sizeof(uint16_t));
    if (bytes != 0) std::memcpy(t.bf16.data(), src, bytes);
  }
  return t;
}

absl::Status write_safetensors(const std::string& path,
                               const std::vector<const WeightTensor*>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) {
    json meta = json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  uint64_t offset = 0;
  std::set<std::string> names;
  for (const WeightTensor* t : tensors) {
    if (t == nullptr) return absl::InvalidArgumentError(absl::StrCat(path, ": null tensor"));
    if (t->name.empty() || t->name == "__metadata__") {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": invalid tensor name '", t->name, "'"));
    }
    if (!names.insert(t->name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", t->name, "' given twice"));
    }
    if (t->shape.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", t->name, "' has no shape (absent tensor)"));
    }
    const size_t stored = t->dtype == DType::kF32 ? t->f32.size() : t->bf16.size();
    if (static_cast<int64_t>(stored) != t->numel()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' has shape %s (%d elements) but holds %d %s elements", path, t->name,
          shape_string(t->shape), t->numel(), stored, dtype_name(t->dtype)));
    }
    const uint64_t bytes = stored * (t->dtype == DType::kF32 ? 4 : 2);
    header[t->name] = {{"dtype", dtype_name(t->dtype)},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_len = text.size();

  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat(tmp, ": cannot create: ", std::strerror(errno)));
  }
  bool ok = write_all(f, &header_len, sizeof header_len) && write_all(f, text.data(), text.size());
  for (const WeightTensor* t : tensors) {
    if (!ok) break;
    ok = t->dtype == DType::kF32 ? write_all(f, t->f32.data(), t->f32.size() * 4)
                                 : write_all(f, t->bf16.data(), t->bf16.size() * 2);
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat(path, ": write failed: ", std::strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace muflow::engine::model
