#include "http/server/openai_server.hpp"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/model/text_stream.hpp"
#include "engine/seconds_between.hpp"
#include "http/server/chat_template.hpp"

namespace muflow::http {

using Clock = std::chrono::steady_clock;
using engine::seconds_between;
using nlohmann::json;

/// Between one handler (waiting on `cv`) and the engine's callbacks (coordinator thread).
struct OpenAiServer::Pending {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<int32_t> tokens;  ///< generated, not yet taken by the handler
  bool finished = false;
  actors::FinishReason reason = actors::FinishReason::kNone;
  absl::Status status;
  Clock::time_point arrival;
  Clock::time_point last_token;
  bool got_token = false;
  int64_t id = -1;  ///< engine request id
};

namespace {

constexpr const char* kJson = "application/json";

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_error(httplib::Response& res, const ApiError& error) {
  res.status = error.status;
  res.set_content(api_error_body(error), kJson);
}

ApiError make_error(int status, std::string type, std::string message, std::string code = "") {
  ApiError e;
  e.status = status;
  e.type = std::move(type);
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
}

// Compares without an early exit, so the time taken does not tell how much of a key matched.
bool constant_time_equal(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

// OpenAI's finish_reason for an engine outcome ("stop" also for a matched stop string).
const char* openai_finish_reason(actors::FinishReason reason, bool stop_string) {
  if (stop_string || reason == actors::FinishReason::kEos) return "stop";
  if (reason == actors::FinishReason::kLength || reason == actors::FinishReason::kMaxPosition) {
    return "length";
  }
  return "abort";
}

std::string sse(const json& j) {
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace

OpenAiServer::OpenAiServer(const actors::Server& server, actors::ServingEngine& engine,
                           const engine::model::Tokenizer* tokenizer, ServeOptions options)
    : server_(server),
      engine_(engine),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      http_(std::make_unique<httplib::Server>()) {
  if (options_.model_name.empty()) options_.model_name = "muflow";
  const auto threads =
      static_cast<size_t>(std::min<int64_t>(options_.max_concurrent_requests, 4096) + 8);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(std::chrono::seconds(30));
  http_->set_write_timeout(std::chrono::seconds(30));
  // Remember the listening socket: bind() widens its accept backlog.
  // SO_REUSEADDR only (a restart may bind while old connections linger in TIME_WAIT);
  // cpp-httplib's default also sets SO_REUSEPORT, which would let a second server bind the
  // same port silently and share its connections. Remembers the socket: bind() widens its
  // accept backlog.
  http_->set_socket_options([this](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_socket_ = sock;
  });
  install_routes();
}

OpenAiServer::~OpenAiServer() { stop(0.0); }

absl::Status OpenAiServer::bind() {
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
  } else if (http_->bind_to_port(options_.host, options_.port)) {
    port_ = options_.port;
  }
  // cpp-httplib 0.11 listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into
  // Debian's shared library): a burst of more new connections overflows it and the kernel
  // drops their SYNs, which clients retry only after 1 s. Listening again on the bound socket
  // sets the backlog (Linux: listen(2) on a listening socket updates it).
  if (port_ > 0 && listen_socket_ >= 0) ::listen(listen_socket_, SOMAXCONN);
  if (port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot bind ", options_.host, ":", options_.port,
                                               " (address in use or not local)"));
  }
  return absl::OkStatus();
}

void OpenAiServer::serve() {
  if (port_ <= 0 || stopping_.load()) return;
  http_->listen_after_bind();
}

void OpenAiServer::stop(double grace_s) {
  if (stopping_.exchange(true)) {
    return;
  }
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(std::max(0.0, grace_s)));
  while (in_flight_.load() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    for (const auto& [id, p] : pending_) engine_.cancel(id);
  }
  // The cancelled requests' handlers answer within a poll interval; then stop listening.
  const Clock::time_point hard = Clock::now() + std::chrono::seconds(5);
  while (in_flight_.load() > 0 && Clock::now() < hard) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Handlers still waiting (an engine step longer than that) answer as aborted at their next
  // poll instead of waiting for an engine about to shut down: the worker pool can be joined.
  abandon_.store(true);
  http_->stop();
}

int64_t OpenAiServer::track(int64_t id, std::shared_ptr<Pending> p) {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  pending_[id] = std::move(p);
  return id;
}

void OpenAiServer::untrack(int64_t id) {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  pending_.erase(id);
}

bool OpenAiServer::authorized(const void* request) const {
  if (options_.api_key.empty()) return true;
  const auto& req = *static_cast<const httplib::Request*>(request);
  return constant_time_equal(req.get_header_value("Authorization"), "Bearer " + options_.api_key);
}

void OpenAiServer::install_routes() {
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/health" || authorized(&req))
      return httplib::Server::HandlerResponse::Unhandled;
    metrics_.on_rejected("unauthorized");
    send_error(res, make_error(401, "invalid_request_error",
                               "missing or incorrect API key: send 'Authorization: Bearer KEY'",
                               "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors cpp-httplib answers itself (413 body too large, 404 no route, 400 malformed
  // request line) get an OpenAI-style body too.
  http_->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413) {
      metrics_.on_rejected("too_large");
      // cpp-httplib caps form-encoded bodies at 8 KiB (CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_
      // MAX_LENGTH), which is what `curl -d` sends without a Content-Type.
      const bool form = req.get_header_value("Content-Type")
                            .starts_with("application/x-www-form-urlencoded");
      send_error(res, make_error(413, "invalid_request_error",
                                 form ? "an application/x-www-form-urlencoded body is limited to "
                                        "8192 bytes: send the JSON body with 'Content-Type: "
                                        "application/json'"
                                      : absl::StrCat("request body larger than ",
                                                     options_.max_body_bytes, " bytes"),
                                 "payload_too_large"));
    } else if (res.status == 404) {
      send_error(res, make_error(404, "invalid_request_error",
                                 absl::StrCat("no route ", req.method, " ", req.path)));
    } else {
      send_error(
          res, make_error(res.status, "invalid_request_error", absl::StrCat("HTTP ", res.status)));
    }
  });

  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (stopping_.load()) {
      res.status = 503;
      res.set_content(R"({"status":"shutting down"})", kJson);
    } else {
      res.set_content(R"({"status":"ok"})", kJson);
    }
  });

  http_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json model = {{"id", options_.model_name},
                  {"object", "model"},
                  {"created", unix_now()},
                  {"owned_by", "muflow"},
                  {"max_model_len", server_.config().max_position_embeddings}};
    res.set_content(json{{"object", "list"}, {"data", json::array({model})}}.dump(), kJson);
  });

  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    absl::StatusOr<actors::EngineStats> stats = engine_.stats();
    if (!stats.ok()) {
      send_error(res, make_error(503, "server_error", std::string(stats.status().message())));
      return;
    }
    absl::StatusOr<int64_t> kv = engine_.kv_cache_bytes();
    res.set_content(metrics_.render(*stats, kv.ok() ? *kv : -1, options_.model_name),
                    "text/plain; version=0.0.4; charset=utf-8");
  });

  auto generate = [this](bool chat) {
    return [this, chat](const httplib::Request& req, httplib::Response& res) {
      if (stopping_.load()) {
        metrics_.on_rejected("shutting_down");
        res.set_header("Retry-After", std::to_string(options_.retry_after_s));
        return send_error(
            res, make_error(503, "server_error", "the server is shutting down", "shutting_down"));
      }
      ApiError error;
      std::optional<CompletionRequest> parsed =
          parse_completion_request(req.body, chat, options_.limits, &error);
      if (!parsed) {
        metrics_.on_rejected("bad_request");
        return send_error(res, error);
      }
      const engine::model::ModelConfig& config = server_.config();
      // The prompt: token ids as given, else the text (chat: rendered) tokenized with BOS.
      std::vector<int32_t> prompt = parsed->prompt_ids;
      if (prompt.empty()) {
        const std::string text = chat ? render_plain_chat(parsed->messages) : *parsed->prompt_text;
        if (tokenizer_ == nullptr) {
          metrics_.on_rejected("bad_request");
          return send_error(res, make_error(400, "invalid_request_error",
                                            "this model has no tokenizer: send 'prompt' as an "
                                            "array of token ids",
                                            "no_tokenizer"));
        }
        // Bound the work before tokenizing: a token is at least one byte of text here
        // (SentencePiece byte fallback), so more bytes than 16x the context cannot fit.
        if (static_cast<int64_t>(text.size()) > 16 * config.max_position_embeddings) {
          metrics_.on_rejected("bad_request");
          return send_error(res, make_error(400, "invalid_request_error",
                                            absl::StrCat("prompt of ", text.size(),
                                                         " bytes cannot fit the context of ",
                                                         config.max_position_embeddings, " tokens"),
                                            "context_length_exceeded"));
        }
        prompt = tokenizer_->encode(text, /*add_bos=*/true);
      }
      if (static_cast<int64_t>(prompt.size()) >= config.max_position_embeddings) {
        metrics_.on_rejected("bad_request");
        return send_error(res, make_error(400, "invalid_request_error",
                                          absl::StrCat("prompt of ", prompt.size(),
                                                       " tokens does not fit the "
                                                       "context of ",
                                                       config.max_position_embeddings, " tokens"),
                                          "context_length_exceeded"));
      }
      engine::serving::Request request;
      request.prompt = prompt;
      request.max_new_tokens = parsed->max_tokens.value_or(chat ? config.max_position_embeddings
                                                                : options_.default_max_tokens);
      engine::topology::SamplingSpec sampling;
      sampling.temperature = parsed->temperature;
      sampling.top_p = parsed->top_p;
      sampling.seed = parsed->seed.value_or(0);
      sampling.key_by_request = !parsed->seed.has_value();
      sampling.stop_at_eos = !parsed->ignore_eos;
      request.sampling = sampling;

      // Admission: a bounded number of generation requests in the engine at once; then a
      // second look at stopping_ once counted (stop() waits for every counted request, so one
      // counted while it drains is not missed).
      const int64_t in_flight_before = in_flight_.fetch_add(1);
      if (in_flight_before < options_.max_concurrent_requests && stopping_.load()) {
        in_flight_.fetch_sub(1);
        metrics_.on_rejected("shutting_down");
        return send_error(res, make_error(503, "server_error", "the server is shutting down",
                                          "shutting_down"));
      }
      if (in_flight_before >= options_.max_concurrent_requests) {
        in_flight_.fetch_sub(1);
        metrics_.on_rejected("queue_full");
        res.set_header("Retry-After", std::to_string(options_.retry_after_s));
        return send_error(res,
                          make_error(429, "rate_limit_error",
                                     absl::StrCat("server busy: ", options_.max_concurrent_requests,
                                                  " requests in flight; retry later"),
                                     "queue_full"));
      }
      auto p = std::make_shared<Pending>();
      p->arrival = Clock::now();
      actors::RequestCallbacks callbacks;
      ServeMetrics* metrics = &metrics_;
      callbacks.on_token = [p, metrics](int32_t token) {
        const Clock::time_point now = Clock::now();
        {
          std::lock_guard<std::mutex> lock(p->mutex);
          if (p->got_token) {
            metrics->on_inter_token(seconds_between(p->last_token, now));
          } else {
            metrics->on_first_token(seconds_between(p->arrival, now));
          }
          p->got_token = true;
          p->last_token = now;
          p->tokens.push_back(token);
        }
        metrics->on_token();
        p->cv.notify_all();  // after unlocking: the woken handler does not block on the mutex
      };
      callbacks.on_finish = [p](const actors::RequestOutput& out, const absl::Status& status) {
        {
          std::lock_guard<std::mutex> lock(p->mutex);
          p->finished = true;
          p->reason = out.finish_reason;
          p->status = status;
        }
        p->cv.notify_all();
      };
      absl::StatusOr<int64_t> id = engine_.submit(std::move(request), std::move(callbacks));
      if (!id.ok()) {
        in_flight_.fetch_sub(1);
        const bool bad_input = absl::IsInvalidArgument(id.status());
        metrics_.on_rejected(bad_input ? "bad_request" : "shutting_down");
        return send_error(res, make_error(bad_input ? 400 : 503,
                                          bad_input ? "invalid_request_error" : "server_error",
                                          std::string(id.status().message())));
      }
      p->id = *id;
      track(*id, p);
      metrics_.on_admitted(static_cast<int64_t>(prompt.size()));

      const std::string response_id =
          absl::StrCat(chat ? "chatcmpl-" : "cmpl-", next_response_id_.fetch_add(1));
      const int64_t created = unix_now();
      const auto num_prompt = static_cast<int64_t>(prompt.size());
      // Output text as it continues the prompt: decoded after the prompt's last tokens, so a
      // leading "▁" becomes the space it is (text_stream.hpp).
      std::vector<int32_t> context(
          prompt.end() - std::min<std::ptrdiff_t>(4, static_cast<std::ptrdiff_t>(prompt.size())),
          prompt.end());
      auto decode = [this](const std::vector<int32_t>& ids) {
        return tokenizer_ != nullptr ? tokenizer_->decode(ids) : std::string();
      };
      auto text =
          std::make_shared<engine::model::TextStream>(decode, std::move(context), parsed->stop);
      auto usage = [num_prompt, text] {
        const auto n = static_cast<int64_t>(text->ids().size());
        return json{{"prompt_tokens", num_prompt},
                    {"completion_tokens", n},
                    {"total_tokens", num_prompt + n}};
      };
      // One choice object: a delta (chat stream), a message (chat), or text (completions).
      auto choice = [chat](const std::string& piece, const json& finish_reason, bool stream,
                           bool first) {
        json c = {{"index", 0}, {"finish_reason", finish_reason}};
        if (!chat) {
          c["text"] = piece;
          c["logprobs"] = nullptr;
        } else if (stream) {
          json delta = json::object();
          if (first) delta["role"] = "assistant";
          if (finish_reason.is_null() || !piece.empty()) delta["content"] = piece;
          c["delta"] = delta;
        } else {
          c["message"] = {{"role", "assistant"}, {"content", piece}};
        }
        return c;
      };
      auto envelope = [=, this](json choices, bool stream) {
        return json{{"id", response_id},
                    {"object", chat ? (stream ? "chat.completion.chunk" : "chat.completion")
                                    : "text_completion"},
                    {"created", created},
                    {"model", options_.model_name},
                    {"choices", std::move(choices)}};
      };
      // A token's event, written by hand (per token, the hot path): the same JSON as
      // envelope(choice(piece, null, stream=true, first)).
      const std::string model_json =
          json(options_.model_name).dump(-1, ' ', false, json::error_handler_t::replace);
      const std::string event_head = absl::StrCat(
          "data: {\"id\":\"", response_id, "\",\"object\":\"",
          chat ? "chat.completion.chunk" : "text_completion", "\",\"created\":", created,
          ",\"model\":", model_json, ",\"choices\":[{\"index\":0,");
      auto token_event = [chat, event_head](const std::string& piece, bool first) {
        const std::string text = json(piece).dump(-1, ' ', false, json::error_handler_t::replace);
        if (!chat) {
          return absl::StrCat(event_head, "\"text\":", text,
                              ",\"logprobs\":null,\"finish_reason\":null}]}\n\n");
        }
        return absl::StrCat(event_head, "\"delta\":{", first ? "\"role\":\"assistant\"," : "",
                            "\"content\":", text, "},\"finish_reason\":null}]}\n\n");
      };
      // Takes the tokens generated so far into `text`; true when the request is over (the
      // engine finished it, or a stop string matched: the engine request is then cancelled).
      struct Progress {
        std::vector<std::string> pieces;  ///< one per token taken
        bool over = false;
        bool stop_string = false;
      };
      auto take = [this, p, text](std::chrono::milliseconds wait) {
        Progress out;
        std::deque<int32_t> tokens;
        bool finished = false;
        {
          std::unique_lock<std::mutex> lock(p->mutex);
          p->cv.wait_for(lock, wait, [&] { return !p->tokens.empty() || p->finished; });
          tokens.swap(p->tokens);
          finished = p->finished;
        }
        for (int32_t t : tokens) {
          out.pieces.push_back(text->push(t));
          if (text->stopped()) {
            out.stop_string = true;
            engine_.cancel(p->id);
            break;
          }
        }
        out.over = finished || out.stop_string || abandon_.load();
        return out;
      };
      // The request's end in the metrics: one the engine refused at arrival (its queue was
      // full: `[scheduler] max_queued_requests`) counts as rejected, as one refused here does,
      // not as finished.
      auto finish_metrics = [this, p](const char* reason, actors::FinishReason engine_reason,
                                      const absl::Status& status) {
        if (engine_reason == actors::FinishReason::kRejected) {
          metrics_.on_rejected("queue_full");
        } else if (!status.ok()) {
          metrics_.on_error();
        } else {
          metrics_.on_finished(reason, seconds_between(p->arrival, Clock::now()));
        }
        untrack(p->id);
        in_flight_.fetch_sub(1);
      };

      if (!parsed->stream) {
        bool stop_string = false;
        for (;;) {
          Progress step = take(std::chrono::milliseconds(1000));
          if (step.over) {
            stop_string = step.stop_string;
            break;
          }
        }
        if (!stop_string) text->flush();  // the held-back text: no stop string can complete
        actors::FinishReason reason;
        absl::Status status;
        {
          std::lock_guard<std::mutex> lock(p->mutex);
          reason = p->reason;
          status = p->status;
        }
        const char* finish = openai_finish_reason(reason, stop_string);
        finish_metrics(finish, reason, status);
        if (!status.ok()) {
          return send_error(res, make_error(500, "server_error", std::string(status.message())));
        }
        if (reason == actors::FinishReason::kRejected) {
          res.set_header("Retry-After", std::to_string(options_.retry_after_s));
          return send_error(res, make_error(429, "rate_limit_error",
                                            "rejected: the engine's queue is full "
                                            "([scheduler] max_queued_requests); retry later",
                                            "queue_full"));
        }
        if (std::string(finish) == "abort") {
          return send_error(
              res, make_error(503, "server_error",
                              "the request was cancelled (server shutting down)", "shutting_down"));
        }
        json c = choice(text->text(), finish, false, false);
        c["token_ids"] = text->ids();  // muflow extension: the generated ids
        json body = envelope(json::array({c}), false);
        body["usage"] = usage();
        res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), kJson);
        return;
      }

      // Streaming: one server-sent event per generated token, then the finish chunk, the
      // usage chunk (stream_options.include_usage) and [DONE].
      auto first = std::make_shared<bool>(true);
      auto ended = std::make_shared<bool>(false);
      const bool include_usage = parsed->include_usage;
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [=](size_t, httplib::DataSink& sink) {
            if (*ended) return false;
            Progress step = take(std::chrono::milliseconds(100));
            // Every token taken goes out in one write (one event each).
            std::string events;
            for (const std::string& piece : step.pieces) {
              events += token_event(piece, *first);
              *first = false;
            }
            if (!events.empty() && !sink.write(events.data(), events.size())) return false;
            if (!step.over) return true;
            std::string tail = step.stop_string ? "" : text->flush();
            if (!tail.empty()) {
              const std::string event =
                  sse(envelope(json::array({choice(tail, nullptr, true, *first)}), true));
              *first = false;
              if (!sink.write(event.data(), event.size())) return false;
            }
            actors::FinishReason reason;
            absl::Status status;
            {
              std::lock_guard<std::mutex> lock(p->mutex);
              reason = p->reason;
              status = p->status;
            }
            const char* finish = openai_finish_reason(reason, step.stop_string);
            events.clear();
            if (reason == actors::FinishReason::kRejected) {
              ApiError e = make_error(429, "rate_limit_error",
                                      "rejected: the engine's queue is full ([scheduler] "
                                      "max_queued_requests); retry later",
                                      "queue_full");
              events += "data: " + api_error_body(e) + "\n\n";
            } else if (!status.ok() || std::string(finish) == "abort") {
              ApiError e =
                  make_error(status.ok() ? 503 : 500, "server_error",
                             status.ok() ? "the request was cancelled (server shutting down)"
                                         : std::string(status.message()),
                             status.ok() ? "shutting_down" : "");
              events += "data: " + api_error_body(e) + "\n\n";
            } else {
              events += sse(envelope(json::array({choice("", finish, true, *first)}), true));
              if (include_usage) {
                json u = envelope(json::array(), true);
                u["usage"] = usage();
                events += sse(u);
              }
            }
            events += "data: [DONE]\n\n";
            *ended = true;
            if (!sink.write(events.data(), events.size())) return false;
            sink.done();
            return true;
          },
          [=, this](bool success) {
            bool finished;
            actors::FinishReason reason;
            absl::Status status;
            {
              std::lock_guard<std::mutex> lock(p->mutex);
              finished = p->finished;
              reason = p->reason;
              status = p->status;
            }
            // A client that went away cancels its request (frees its KV cache).
            if (!finished) engine_.cancel(p->id);
            finish_metrics(
                success && *ended ? openai_finish_reason(reason, text->stopped()) : "abort",
                finished ? reason : actors::FinishReason::kCancelled, status);
          });
    };
  };
  http_->Post("/v1/completions", generate(false));
  http_->Post("/v1/chat/completions", generate(true));
}

}  // namespace muflow::http
