// Fuzzes the Azure LLM inference trace CSV parser (engine/serving/azure_trace.hpp) on
// in-memory text (TIMESTAMP,ContextTokens,GeneratedTokens).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/serving/azure_trace.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)muflow::engine::serving::parse_azure_trace(text, "fuzz.csv", 0);
  return 0;
}
