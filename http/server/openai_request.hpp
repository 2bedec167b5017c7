#pragma once
/// \file
/// Parsing and validation of OpenAI-compatible request bodies (`POST /v1/completions`,
/// `POST /v1/chat/completions`) into plain values, with OpenAI-style errors. Pure: no engine,
/// no sockets; the fuzz target and the unit tests call it directly.
///
/// Source of the field names, defaults and error shape: the OpenAI API reference
/// (https://platform.openai.com/docs/api-reference/completions/create and
/// .../chat/create) and vLLM's extension `ignore_eos` (vllm/entrypoints/openai/protocol.py).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace muflow::http {

/// An OpenAI-style error: HTTP status and the body `{"error": {"message", "type", "param",
/// "code"}}` (api_error_body).
struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;  ///< the offending field ("" = none)
  std::string code;   ///< machine-readable code ("" = null)
};

/// `{"error": {...}}` as compact JSON text.
std::string api_error_body(const ApiError& error);

/// One chat message (`role` is "system", "developer", "user", "assistant" or "tool";
/// `content` text, empty for an assistant message that gave none).
struct ChatMessage {
  std::string role;
  std::string content;
};

/// Limits on what one request body may ask for; a field beyond them is a 400 naming it.
struct RequestLimits {
  int64_t max_prompt_tokens = 1 << 20;  ///< token-id prompts: most ids
  int64_t max_tokens = 1 << 20;         ///< most `max_tokens`
  int64_t max_messages = 1024;          ///< chat: most messages
  int64_t max_stop_strings = 4;         ///< OpenAI allows up to 4
  int64_t max_stop_bytes = 256;         ///< bytes per stop string
};

/// A validated completion or chat completion request.
struct CompletionRequest {
  bool chat = false;                       ///< /v1/chat/completions
  std::string model;                       ///< as given ("" when absent)
  std::optional<std::string> prompt_text;  ///< completions: a string prompt
  std::vector<int32_t> prompt_ids;         ///< completions: a token-id prompt (ids unchecked)
  std::vector<ChatMessage> messages;       ///< chat
  std::optional<int64_t> max_tokens;       ///< >= 1 when given (`max_completion_tokens` too)
  double temperature = 1.0;                ///< [0, 2], OpenAI's default 1
  double top_p = 1.0;                      ///< (0, 1]
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;  ///< at most limits.max_stop_strings, non-empty
  bool stream = false;
  bool include_usage = false;  ///< stream_options.include_usage
  bool ignore_eos = false;     ///< vLLM extension: generate past EOS
};

/// Parses a body. `chat` selects the endpoint's schema. Errors (status 400, `param` set):
/// not JSON or not an object; a field of the wrong type; `prompt` missing, empty, a list of
/// strings with more than one element (batching: n prompts per request is not supported),
/// or ids outside int32; `messages` missing/empty or a message without string role/content
/// (content may also be a list of `{"type":"text","text":...}` parts); `n` != 1; `best_of`
/// != 1; `logprobs` (other than false / 0), `top_logprobs`, `echo`, `suffix`, `logit_bias`,
/// `tools`, `functions`, `tool_choice` or `response_format` set; non-neutral presence /
/// frequency / repetition penalties; numbers out of range (see the fields). Unknown fields are
/// ignored, as OpenAI-compatible servers do. Never throws.
std::optional<CompletionRequest> parse_completion_request(std::string_view body, bool chat,
                                                          const RequestLimits& limits,
                                                          ApiError* error);

}  // namespace muflow::http
