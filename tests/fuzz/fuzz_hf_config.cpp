// Fuzzes the Hugging Face config.json reader (engine/model/hf_config.hpp) through its file
// entry point, as load_hf_model calls it. A config that parses is written back with
// hf_config_json and must parse again to the same config (the documented round trip).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "engine/model/hf_config.hpp"
#include "tests/fuzz/fuzz_input_file.hpp"

namespace model = muflow::engine::model;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = muflow::fuzz::write_input("config.json", data, size);
  absl::StatusOr<model::ModelConfig> config = model::parse_hf_config(path);
  if (!config.ok()) return 0;
  absl::StatusOr<model::ModelConfig> again =
      model::parse_hf_config_json(model::hf_config_json(*config), "round trip");
  if (!again.ok()) std::abort();  // a config the reader accepted must survive a round trip
  return 0;
}
