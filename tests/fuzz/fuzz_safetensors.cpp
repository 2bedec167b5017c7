// Fuzzes the safetensors reader (engine/model/safetensors.hpp): the input is a whole
// .safetensors file (8-byte header length, JSON header, data buffer). When it opens, every
// tensor is read back, so offsets the header validation accepted are dereferenced.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/model/safetensors.hpp"
#include "tests/fuzz/fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = muflow::fuzz::write_input("model.safetensors", data, size);
  absl::StatusOr<muflow::engine::model::SafetensorsFile> file =
      muflow::engine::model::open_safetensors(path);
  if (!file.ok()) return 0;
  for (const auto& [name, entry] : file->entries()) (void)file->read_tensor(name);
  return 0;
}
