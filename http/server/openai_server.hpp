#pragma once
/// \file
/// `muflow serve`: an OpenAI-compatible HTTP server in front of one ServingEngine, on
/// cpp-httplib (Debian's libcpp-httplib-dev 0.11: packaged and maintained, blocking
/// thread-per-connection model that suits server-sent events — each stream is a worker thread
/// waiting on its request's tokens; the pool is sized to the admission limit).
///
/// Routes: POST /v1/completions, POST /v1/chat/completions (JSON or server-sent events),
/// GET /v1/models, GET /health, GET /metrics (Prometheus text). See http/README.md.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "actors/server.hpp"
#include "actors/serving_engine.hpp"
#include "engine/model/tokenizer.hpp"
#include "http/server/openai_request.hpp"
#include "http/server/serve_metrics.hpp"

namespace httplib {
class Server;
}

namespace muflow::http {

/// Settings of one server (the `muflow serve` flags).
struct ServeOptions {
  std::string host = "127.0.0.1";  ///< bind address (loopback by default)
  int port = 8000;                 ///< 0: any free port (port() tells which)
  std::string api_key;             ///< non-empty: every route but /health needs "Bearer KEY"
  std::string model_name;          ///< the id /v1/models lists and responses carry
  /// Admission: most HTTP generation requests in the engine at once (waiting + running);
  /// more get 429 with Retry-After instead of queueing without bound.
  int64_t max_concurrent_requests = 64;
  int64_t retry_after_s = 1;        ///< the 429's Retry-After header, seconds
  size_t max_body_bytes = 1 << 20;  ///< larger request bodies get 413
  int64_t default_max_tokens = 16;  ///< completions without max_tokens (OpenAI's 16)
  RequestLimits limits;             ///< per-field bounds of request bodies
};

/// The server. Handlers run on cpp-httplib's worker threads (a pool of
/// max_concurrent_requests + 8); engine callbacks run on the coordinator actor and only hand
/// tokens to the waiting handler. Owns nothing of the engine: `server`, `engine` and
/// `tokenizer` (may be null: token-id prompts only, no text in responses) must outlive it, and
/// the engine must be shut down before the server is destroyed (its requests' callbacks record
/// into the server's metrics; `muflow serve` does: stop(), engine shutdown, then destruction).
/// stop() is idempotent: a second call returns at once while the first may still drain.
class OpenAiServer {
 public:
  OpenAiServer(const actors::Server& server, actors::ServingEngine& engine,
               const engine::model::Tokenizer* tokenizer, ServeOptions options);
  ~OpenAiServer();
  OpenAiServer(const OpenAiServer&) = delete;
  OpenAiServer& operator=(const OpenAiServer&) = delete;

  /// Binds host:port. Errors: Unavailable "cannot bind HOST:PORT" (in use, bad address).
  absl::Status bind();
  /// The bound port (after bind).
  int port() const { return port_; }
  /// Serves until stop(); returns at once when not bound. Blocks the calling thread.
  void serve();
  /// Graceful stop, from any thread (a signal watcher): new generation requests get 503;
  /// in-flight ones may finish for `grace_s` seconds, then are cancelled (their streams end
  /// with finish_reason "abort" semantics: an error event); then the listener stops and
  /// serve() returns. Idempotent.
  void stop(double grace_s);
  /// Generation requests admitted and not yet answered.
  int64_t in_flight() const { return in_flight_.load(); }

 private:
  struct Pending;  // one generation request between its handler and the engine callbacks

  void install_routes();
  bool authorized(const void* request) const;
  int64_t track(int64_t id, std::shared_ptr<Pending> p);
  void untrack(int64_t id);

  const actors::Server& server_;
  actors::ServingEngine& engine_;
  const engine::model::Tokenizer* tokenizer_;
  ServeOptions options_;
  std::unique_ptr<httplib::Server> http_;
  ServeMetrics metrics_;
  int port_ = -1;
  int listen_socket_ = -1;  ///< the bound socket (set by cpp-httplib's socket-options hook)
  std::atomic<bool> stopping_{false};
  std::atomic<bool> abandon_{false};  ///< stop(): handlers stop waiting on the engine
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int64_t> next_response_id_{0};
  std::mutex pending_mutex_;
  absl::flat_hash_map<int64_t, std::shared_ptr<Pending>> pending_;  ///< by engine request id
};

}  // namespace muflow::http
