// Fuzzes `model.safetensors.index.json` as load_hf_model reads it (engine/model/model_loader.hpp).
// A tiny synthetic model (1 layer, 2 experts, hidden 8) is written once as a sharded HF folder
// (write_hf_model with 512-byte shards); each input replaces its index, then the folder is
// loaded. Seeds: the writer's own index and edits of it (corpus/safetensors_index/).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/model/model_loader.hpp"
#include "engine/model/model_writer.hpp"
#include "engine/model/synthetic_model.hpp"
#include "tests/fuzz/fuzz_input_file.hpp"

namespace model = muflow::engine::model;

namespace {

// The folder with config.json and model-0000N-of-0000M.safetensors; created on first use.
const std::string& model_dir() {
  static const std::string dir = [] {
    model::ModelConfig c;
    c.model_type = model::ModelType::kMixtral;
    c.vocab_size = 16;
    c.hidden_size = 8;
    c.num_layers = 1;
    c.num_heads = 2;
    c.num_kv_heads = 1;
    c.head_dim = 4;
    c.num_experts = 2;
    c.num_topk = 1;
    c.expert_ffn = 8;
    const std::string d = (muflow::fuzz::scratch_dir() / "model").string();
    const absl::Status st =
        model::write_hf_model(model::make_synthetic_model(c, 1, model::DType::kF32), d, 512);
    if (!st.ok()) {
      std::fprintf(stderr, "fuzz_safetensors_index: %s\n", std::string(st.message()).c_str());
      std::abort();
    }
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = model_dir();
  muflow::fuzz::write_input("model/model.safetensors.index.json", data, size);
  (void)model::load_hf_model(dir);
  return 0;
}
