// Fuzzes a prompts file (`[workload] prompts_file`, one prompt per line) through
// make_requests (engine/serving/workload.hpp). The encoder stands in for a tokenizer: one id
// per byte, so prompts of bytes the "vocabulary" lacks (>= 200) exercise the id check.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/serving/workload.hpp"
#include "tests/fuzz/fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  muflow::engine::topology::WorkloadSpec spec;
  spec.kind = "prompts";
  spec.prompts_file = muflow::fuzz::write_input("prompts.txt", data, size);
  spec.max_new_tokens = 4;
  const auto encode = [](const std::string& text) {
    std::vector<int32_t> ids;
    for (const char c : text) ids.push_back(static_cast<unsigned char>(c));
    return ids;
  };
  (void)muflow::engine::serving::make_requests(spec, /*vocab_size=*/200, encode);
  return 0;
}
