#include "http/client/openai_stream_client.hpp"

#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace muflow::http::client {
namespace {

using Json = nlohmann::json;

// Never throws (a string the user gave may hold invalid UTF-8).
std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// At most `max` bytes of `text` for a message: control and non-ASCII bytes become '?', so the
// message is valid UTF-8 whatever the server sent.
std::string printable(std::string_view text, size_t max) {
  std::string out(text.substr(0, max));
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) c = '?';
  }
  if (text.size() > max) out += "...";
  return out;
}

// Longest timeout accepted (about 116 days): keeps the conversion to time_t well defined.
constexpr double kMaxTimeoutS = 1e7;

// Splits seconds into httplib's (sec, usec).
std::pair<time_t, time_t> sec_usec(double s) {
  const double whole = std::floor(s);
  return {static_cast<time_t>(whole), static_cast<time_t>((s - whole) * 1e6)};
}

httplib::Headers request_headers(const ClientOptions& o) {
  httplib::Headers h;
  // An event stream must arrive as the server writes it: no compression.
  h.emplace("Accept-Encoding", "identity");
  if (!o.api_key.empty()) h.emplace("Authorization", "Bearer " + o.api_key);
  return h;
}

// "HTTP 429 (rate_limit_exceeded): message" from an OpenAI error body, else the body's start.
std::string http_error_text(int status, const std::string& body) {
  std::string text = absl::StrCat("HTTP ", status);
  const Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    const Json& e = j["error"];
    if (e.contains("code") && (e["code"].is_string() || e["code"].is_number())) {
      absl::StrAppend(&text, " (",
                      e["code"].is_string() ? e["code"].get<std::string>() : dump(e["code"]), ")");
    } else if (e.contains("type") && e["type"].is_string()) {
      absl::StrAppend(&text, " (", e["type"].get<std::string>(), ")");
    }
    if (e.contains("message") && e["message"].is_string()) {
      absl::StrAppend(&text, ": ", e["message"].get<std::string>());
    }
    return text;
  }
  const std::string snippet = printable(body, 200);
  if (!snippet.empty()) absl::StrAppend(&text, ": ", snippet);
  return text;
}

// Retry-After as delta-seconds (RFC 9110 §10.2.3); an HTTP date is not interpreted (-1).
double parse_retry_after(const std::string& value) {
  double s = 0.0;
  if (absl::SimpleAtod(absl::StripAsciiWhitespace(value), &s) && std::isfinite(s) && s >= 0) {
    return s;
  }
  return -1.0;
}

// Reads one stream's events into a CompletionResult. Owned by complete()'s stack.
class StreamReader {
 public:
  StreamReader(CompletionResult* out, const SseLimits& limits) : out_(out), parser_(limits) {}

  // false = stop reading (the failure is recorded).
  bool feed(std::string_view bytes, double now_s) {
    events_.clear();
    if (absl::Status s = parser_.feed(bytes, &events_); !s.ok()) {
      // Events completed before the oversize one still count.
      for (const SseEvent& e : events_) {
        if (!on_event(e, now_s)) return false;
      }
      return fail(FailureKind::kBadStream, std::string(s.message()));
    }
    for (const SseEvent& e : events_) {
      if (!on_event(e, now_s)) return false;
    }
    return true;
  }

  bool done() const { return done_; }
  bool partial() const { return parser_.has_partial_event(); }
  bool failed() const { return failed_; }

  bool fail(FailureKind kind, std::string why) {
    if (!failed_) {
      failed_ = true;
      out_->failure = kind;
      out_->error = std::move(why);
    }
    return false;
  }

 private:
  bool on_event(const SseEvent& e, double now_s) {
    if (done_) return true;  // nothing is expected after [DONE]; ignore it
    if (e.data == "[DONE]") {
      done_ = true;
      return true;
    }
    const Json j = Json::parse(e.data, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) {
      return fail(FailureKind::kBadStream,
                  absl::StrCat("event ", num_events_ + 1, " is not a JSON object: '",
                               printable(e.data, 120), "'"));
    }
    ++num_events_;
    if (j.contains("error") && !j["error"].is_null()) {
      std::string msg = dump(j["error"]);
      if (j["error"].is_object() && j["error"].contains("message") &&
          j["error"]["message"].is_string()) {
        msg = j["error"]["message"].get<std::string>();
      }
      return fail(FailureKind::kServerError, "error event in the stream: " + msg);
    }
    if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
      const Json& c = j["choices"][0];
      std::string text;
      bool finished = false;
      if (c.is_object()) {
        if (c.contains("text") && c["text"].is_string()) text = c["text"].get<std::string>();
        if (c.contains("finish_reason") && c["finish_reason"].is_string()) {
          out_->finish_reason = c["finish_reason"].get<std::string>();
          finished = true;
        }
      }
      // A closing chunk (empty text, finish_reason set) carries no token.
      if (!(finished && text.empty())) out_->token_times_s.push_back(now_s);
      out_->text += text;
      return true;
    }
    if (j.contains("usage") && j["usage"].is_object()) {
      const Json& u = j["usage"];
      if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) {
        out_->usage_prompt_tokens = u["prompt_tokens"].get<int64_t>();
      }
      if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) {
        out_->usage_completion_tokens = u["completion_tokens"].get<int64_t>();
      }
    }
    return true;
  }

  CompletionResult* out_;
  SseParser parser_;
  std::vector<SseEvent> events_;
  int64_t num_events_ = 0;
  bool done_ = false;
  bool failed_ = false;
};

}  // namespace

const char* failure_kind_name(FailureKind kind) {
  switch (kind) {
    case FailureKind::kNone:
      return "none";
    case FailureKind::kConnect:
      return "connect";
    case FailureKind::kConnectTimeout:
      return "connect_timeout";
    case FailureKind::kWrite:
      return "write";
    case FailureKind::kReadTimeout:
      return "read_timeout";
    case FailureKind::kDropped:
      return "dropped";
    case FailureKind::kRequestTimeout:
      return "request_timeout";
    case FailureKind::kHttpStatus:
      return "http_status";
    case FailureKind::kBadStream:
      return "bad_stream";
    case FailureKind::kServerError:
      return "server_error";
  }
  return "unknown";
}

int64_t CompletionResult::num_output_tokens() const {
  return usage_completion_tokens >= 0 ? usage_completion_tokens
                                      : static_cast<int64_t>(token_times_s.size());
}

double CompletionResult::ttft_s() const {
  return token_times_s.empty() ? 0.0 : token_times_s.front() - start_s;
}

double CompletionResult::latency_s() const {
  return token_times_s.empty() ? 0.0 : token_times_s.back() - start_s;
}

absl::StatusOr<std::unique_ptr<OpenAiStreamClient>> OpenAiStreamClient::create(
    const BaseUrl& url, const ClientOptions& options,
    std::chrono::steady_clock::time_point origin) {
  for (auto [name, v] :
       {std::pair<const char*, double>{"connect_timeout_s", options.connect_timeout_s},
        {"read_timeout_s", options.read_timeout_s},
        {"write_timeout_s", options.write_timeout_s},
        {"request_timeout_s", options.request_timeout_s}}) {
    if (!(v > 0.0) || !(v <= kMaxTimeoutS)) {  // also rejects NaN
      return absl::InvalidArgumentError(
          absl::StrFormat("client option %s must be a finite number > 0 and <= %g s (got %g)", name,
                          kMaxTimeoutS, v));
    }
  }
  if (options.sse.max_line_bytes < 1 || options.sse.max_event_bytes < 1 ||
      options.max_error_body_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "client options: sse.max_line_bytes (%d) and sse.max_event_bytes (%d) must be >= 1, "
        "max_error_body_bytes (%d) >= 0",
        options.sse.max_line_bytes, options.sse.max_event_bytes, options.max_error_body_bytes));
  }
  std::unique_ptr<OpenAiStreamClient> c(new OpenAiStreamClient());
  c->url_ = url;
  c->options_ = options;
  c->origin_ = origin;
  c->http_ = std::make_unique<httplib::Client>(url.origin());
  if (!c->http_->is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "URL '", url.text(), "': cannot make a client for it",
        url.scheme == "https" ? " (this cpp-httplib was built without TLS support)" : ""));
  }
  const auto [cs, cus] = sec_usec(options.connect_timeout_s);
  const auto [rs, rus] = sec_usec(options.read_timeout_s);
  const auto [ws, wus] = sec_usec(options.write_timeout_s);
  c->http_->set_connection_timeout(cs, cus);
  c->http_->set_read_timeout(rs, rus);
  c->http_->set_write_timeout(ws, wus);
  c->http_->set_keep_alive(true);
  c->http_->set_tcp_nodelay(true);
  c->http_->set_follow_location(false);
  return c;
}

OpenAiStreamClient::~OpenAiStreamClient() = default;

double OpenAiStreamClient::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count();
}

CompletionResult OpenAiStreamClient::complete(const CompletionRequest& request) {
  CompletionResult out;
  Json body = {{"model", request.model},
               {"prompt", request.prompt},
               {"max_tokens", request.max_tokens},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}},
               {"ignore_eos", request.ignore_eos},
               {"temperature", request.temperature}};
  httplib::Request req;
  req.method = "POST";
  req.path = url_.path_prefix + "/v1/completions";
  req.headers = request_headers(options_);
  req.headers.emplace("Content-Type", "application/json");
  req.headers.emplace("Accept", "text/event-stream");
  req.body = body.dump(-1, ' ', false, Json::error_handler_t::replace);

  StreamReader reader(&out, options_.sse);
  std::string error_body;
  double last_bytes_s = 0.0;
  req.response_handler = [&](const httplib::Response& res) {
    out.http_status = res.status;
    if (res.has_header("Retry-After")) {
      out.retry_after_s = parse_retry_after(res.get_header_value("Retry-After"));
    }
    if (res.status == 200) {
      const std::string type = absl::AsciiStrToLower(res.get_header_value("Content-Type"));
      if (!absl::StartsWith(type, "text/event-stream")) {
        return reader.fail(FailureKind::kBadStream,
                           absl::StrCat("HTTP 200 with Content-Type '", printable(type, 80),
                                        "', expected text/event-stream (no streaming?)"));
      }
    }
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    const double now = now_s();
    last_bytes_s = now;
    if (out.http_status != 200) {
      const size_t room =
          static_cast<size_t>(options_.max_error_body_bytes) -
          std::min(error_body.size(), static_cast<size_t>(options_.max_error_body_bytes));
      error_body.append(data, std::min(n, room));
      return true;
    }
    if (!reader.feed(std::string_view(data, n), now)) return false;
    // After `data: [DONE]` nothing more is read: a server that keeps the body open (or keeps
    // sending comments) cannot hold the client.
    if (reader.done()) return false;
    if (now - out.start_s > options_.request_timeout_s) {
      return reader.fail(FailureKind::kRequestTimeout,
                         absl::StrFormat("request timed out after %g s (request_timeout_s) with "
                                         "%d token events",
                                         options_.request_timeout_s, out.token_times_s.size()));
    }
    return true;
  };

  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  out.start_s = now_s();
  last_bytes_s = out.start_s;
  const bool sent = http_->send(req, res, err);
  out.end_s = now_s();

  if (reader.failed()) return out;  // our own reason (the receiver stopped reading)
  if (!sent && !(reader.done() && err == httplib::Error::Canceled)) {
    const double idle = out.end_s - last_bytes_s;
    switch (err) {
      case httplib::Error::Connection:
        out.failure = FailureKind::kConnect;
        out.error = absl::StrCat("cannot connect to ", url_.origin(),
                                 " (connection refused, host unreachable or name not resolved)");
        break;
      case httplib::Error::ConnectionTimeout:
        out.failure = FailureKind::kConnectTimeout;
        out.error = absl::StrFormat("connecting to %s timed out after %g s", url_.origin(),
                                    options_.connect_timeout_s);
        break;
      case httplib::Error::Write:
        out.failure = FailureKind::kWrite;
        out.error = absl::StrCat("sending the request to ", url_.origin(), " failed");
        break;
      case httplib::Error::Read:
        // httplib reports a read timeout and a closed connection alike; the idle time tells.
        if (idle >= 0.9 * options_.read_timeout_s) {
          out.failure = FailureKind::kReadTimeout;
          out.error =
              absl::StrFormat("no bytes from %s for %g s (read timeout) after %d token events",
                              url_.origin(), options_.read_timeout_s, out.token_times_s.size());
        } else {
          out.failure = FailureKind::kDropped;
          out.error = absl::StrFormat(
              "connection to %s closed mid-answer (HTTP status %d, after %d token events)",
              url_.origin(), out.http_status, out.token_times_s.size());
        }
        break;
      default:
        out.failure = FailureKind::kDropped;
        out.error =
            absl::StrCat("request to ", url_.origin(), " failed: ", httplib::to_string(err));
        break;
    }
    return out;
  }
  if (res.status != 200) {
    out.http_status = res.status;
    out.failure = FailureKind::kHttpStatus;
    out.error = http_error_text(res.status, error_body);
    if (out.retry_after_s >= 0) {
      absl::StrAppend(&out.error, absl::StrFormat("; Retry-After: %g s", out.retry_after_s));
    }
    return out;
  }
  if (!reader.done()) {
    out.failure = FailureKind::kDropped;
    out.error = absl::StrFormat(
        "stream from %s ended before 'data: [DONE]' after %d token events%s", url_.origin(),
        out.token_times_s.size(), reader.partial() ? " (last event cut off)" : "");
    return out;
  }
  if (out.token_times_s.empty()) {
    out.failure = FailureKind::kBadStream;
    out.error = "the stream ended without any token event";
    return out;
  }
  out.ok = true;
  return out;
}

absl::StatusOr<std::vector<std::string>> OpenAiStreamClient::list_models() {
  const std::string path = url_.path_prefix + "/v1/models";
  const std::string where = url_.text() + "/v1/models";
  httplib::Result res = http_->Get(path, request_headers(options_));
  if (!res) {
    const httplib::Error err = res.error();
    if (err == httplib::Error::Connection) {
      return absl::UnavailableError(absl::StrCat(
          "cannot connect to ", url_.origin(),
          " (connection refused, host unreachable or name not resolved); is the server running?"));
    }
    if (err == httplib::Error::ConnectionTimeout) {
      return absl::UnavailableError(absl::StrFormat("connecting to %s timed out after %g s",
                                                    url_.origin(), options_.connect_timeout_s));
    }
    return absl::UnavailableError(
        absl::StrCat("GET ", where, " failed: ", httplib::to_string(err)));
  }
  if (res->status == 401 || res->status == 403) {
    return absl::UnauthenticatedError(
        absl::StrCat("GET ", where, ": ", http_error_text(res->status, res->body),
                     options_.api_key.empty() ? " (the server wants an API key: --api-key)" : ""));
  }
  if (res->status != 200) {
    return absl::FailedPreconditionError(
        absl::StrCat("GET ", where, ": ", http_error_text(res->status, res->body)));
  }
  const Json j = Json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array()) {
    return absl::InvalidArgumentError(absl::StrCat("GET ", where,
                                                   ": expected {\"data\": [{\"id\": ...}]}, got '",
                                                   printable(res->body, 120), "'"));
  }
  std::vector<std::string> ids;
  for (const Json& m : j["data"]) {
    if (!m.is_object() || !m.contains("id") || !m["id"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("GET ", where, ": a model entry without a string \"id\": ", dump(m)));
    }
    ids.push_back(m["id"].get<std::string>());
  }
  return ids;
}

}  // namespace muflow::http::client
