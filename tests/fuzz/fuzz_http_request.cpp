// Fuzzes the body of POST /v1/completions and /v1/chat/completions
// (http/server/openai_request.hpp): the first byte picks the endpoint, the rest is the body.
// A rejected body must come with an error message; api_error_body must then be valid JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "http/server/openai_request.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = (data[0] & 1) != 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  muflow::http::ApiError error;
  const muflow::http::RequestLimits limits;
  if (muflow::http::parse_completion_request(body, chat, limits, &error)) return 0;
  if (error.message.empty()) std::abort();  // every rejection says why
  if (!nlohmann::json::accept(muflow::http::api_error_body(error))) std::abort();
  return 0;
}
