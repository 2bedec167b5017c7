#pragma once
/// \file
/// One streaming `POST /v1/completions` request to an OpenAI-compatible server (`muflow
/// serve`, vLLM, ...), timed token by token, and `GET /v1/models`.
///
/// What is timed follows vLLM's benchmark client (vllm-project/vllm,
/// vllm/benchmarks/lib/endpoint_request_func.py, `async_request_openai_completions`, commit
/// 3aee4a4f4c4d1a2a7af3ebdb88c768e459e6c602): the start is taken just before the request is
/// sent (connecting included); every server-sent event whose `choices` array is non-empty is
/// one token event, timed when it is parsed; the request succeeded when the answer was HTTP
/// 200 and at least one token event arrived. Two additions: an event whose choice has empty
/// `text` and a non-null `finish_reason` is the stream's closing chunk, not a token (the
/// `muflow serve` protocol sends one after the last token); and the stream must end with
/// `data: [DONE]`, so a connection dropped mid-stream is a failure.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "http/client/base_url.hpp"
#include "http/client/sse_parser.hpp"

namespace httplib {
class Client;
}  // namespace httplib

namespace muflow::http::client {

/// Connection limits and credentials of a client.
struct ClientOptions {
  std::string api_key;              ///< sent as "Authorization: Bearer KEY" when non-empty
  double connect_timeout_s = 10.0;  ///< TCP (and TLS) connect, seconds (> 0)
  /// Longest wait for the next bytes of an answer, seconds (> 0): bounds the time to the first
  /// token and every gap between tokens; a server that stalls longer fails the request.
  double read_timeout_s = 60.0;
  double write_timeout_s = 10.0;  ///< sending the request, seconds (> 0)
  /// Whole request, seconds (> 0), checked whenever bytes arrive (so a request ends at most
  /// read_timeout_s after it): stops a server that keeps a stream alive with comments but
  /// never finishes. Default 6 h, the total timeout of vLLM's benchmark client.
  double request_timeout_s = 6 * 3600.0;
  SseLimits sse;                            ///< per-stream event size limits
  int64_t max_error_body_bytes = 64 << 10;  ///< an error answer's body kept for the message
};

/// What to generate. Plain value.
struct CompletionRequest {
  std::string model;            ///< the request's "model" (the server's name for it)
  std::vector<int32_t> prompt;  ///< [num_prompt_tokens] token ids, sent as a JSON array
  int64_t max_tokens = 16;      ///< "max_tokens": tokens to generate (>= 1)
  bool ignore_eos = true;       ///< "ignore_eos": generate max_tokens even past EOS
  double temperature = 0.0;     ///< "temperature" (0 = greedy)
};

/// Why a request failed, coarsely (for counting failures by cause).
enum class FailureKind {
  kNone,            ///< succeeded
  kConnect,         ///< no connection (refused, unreachable, name not resolved)
  kConnectTimeout,  ///< connecting took longer than connect_timeout_s
  kWrite,           ///< sending the request failed
  kReadTimeout,     ///< no bytes for read_timeout_s
  kDropped,         ///< the connection closed before `data: [DONE]`
  kRequestTimeout,  ///< request_timeout_s elapsed
  kHttpStatus,      ///< the server answered with a status other than 200
  kBadStream,       ///< not an event stream, malformed event JSON, oversize event, no tokens
  kServerError,     ///< an `{"error": ...}` event inside the stream
};

/// A short name of `kind` ("connect", "read_timeout", "http_status", ...). Pure.
const char* failure_kind_name(FailureKind kind);

/// The outcome of one request. Times are seconds since the caller's origin (the `origin`
/// given to OpenAiStreamClient::create) on std::chrono::steady_clock.
struct CompletionResult {
  bool ok = false;
  FailureKind failure = FailureKind::kNone;
  /// Why it failed, a sentence naming the server: e.g. "HTTP 429 (rate_limit_exceeded): too
  /// many requests; Retry-After: 2 s". Empty when ok.
  std::string error;
  int http_status = 0;                   ///< 0 when no answer arrived
  double retry_after_s = -1.0;           ///< the answer's Retry-After (seconds), -1 when absent
  double start_s = 0.0;                  ///< just before the request was sent
  double end_s = 0.0;                    ///< when the answer ended or the request failed
  std::vector<double> token_times_s;     ///< [num token events] when each was parsed
  int64_t usage_prompt_tokens = -1;      ///< "usage.prompt_tokens", -1 when not sent
  int64_t usage_completion_tokens = -1;  ///< "usage.completion_tokens", -1 when not sent
  std::string text;                      ///< the pieces' "text" concatenated
  std::string finish_reason;             ///< the last non-null "finish_reason" ("stop", "length")

  /// Output tokens: usage.completion_tokens when the server sent it, else the number of token
  /// events (vLLM counts the same way but re-tokenises the text when usage is missing).
  int64_t num_output_tokens() const;
  /// Time to first token, seconds: first token event - start_s; 0 without token events.
  double ttft_s() const;
  /// End-to-end latency as vLLM's E2EL, seconds: last token event - start_s (the usage chunk
  /// and `[DONE]` after it are not counted); 0 without token events.
  double latency_s() const;
};

/// A client of one server. Keeps its connection open between requests (HTTP keep-alive).
/// Owned by one thread at a time: calls must not overlap (one client per worker thread).
class OpenAiStreamClient {
 public:
  /// A client of `url`; times are seconds since `origin`. Errors: InvalidArgument when a
  /// timeout is not in (0, 1e7] seconds, an SSE limit < 1 or max_error_body_bytes < 0, or for an
  /// https URL when cpp-httplib was built without TLS. Nothing is connected yet.
  static absl::StatusOr<std::unique_ptr<OpenAiStreamClient>> create(
      const BaseUrl& url, const ClientOptions& options,
      std::chrono::steady_clock::time_point origin);
  ~OpenAiStreamClient();
  OpenAiStreamClient(const OpenAiStreamClient&) = delete;
  OpenAiStreamClient& operator=(const OpenAiStreamClient&) = delete;

  /// Sends `request` with `"stream": true, "stream_options": {"include_usage": true}` and
  /// reads the event stream to its end. Never throws; every failure (no connection, timeouts,
  /// non-200 status, malformed or oversize events, connection dropped before `data: [DONE]`)
  /// is reported in the result, with the times measured until then. Blocks for at most about
  /// connect + request_timeout_s + read_timeout_s.
  CompletionResult complete(const CompletionRequest& request);

  /// `GET /v1/models`: the "id" of every entry of "data", in order. Errors: Unavailable when
  /// the server cannot be reached (the message names the URL and says why); Unauthenticated
  /// for HTTP 401/403 (with the server's message); FailedPrecondition for another non-200
  /// status; InvalidArgument when the body is not `{"data": [{"id": ...}, ...]}`.
  absl::StatusOr<std::vector<std::string>> list_models();

 private:
  OpenAiStreamClient() = default;
  double now_s() const;

  BaseUrl url_;
  ClientOptions options_;
  std::chrono::steady_clock::time_point origin_;
  std::unique_ptr<httplib::Client> http_;
};

}  // namespace muflow::http::client
