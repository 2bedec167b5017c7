// muflow::Engine (include/muflow/muflow.hpp): the public API over actors::Server and
// actors::ServingEngine. Converts between the std-only public types and the internal ones
// (absl::Status, engine::serving::Request, actors::RequestOutput), streams text pieces with an
// incremental detokenizer, and guarantees one on_finish per accepted request, shutdown
// included.
#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "actors/cluster/cluster_driver.hpp"
#include "actors/server.hpp"
#include "actors/serving_engine.hpp"
#include "engine/model/text_stream.hpp"
#include "engine/model/tokenizer.hpp"
#include "engine/topology/topology.hpp"
#include "muflow/muflow.hpp"

namespace muflow {
namespace {

using Clock = std::chrono::steady_clock;

Status to_status(const absl::Status& s) {
  if (s.ok()) return Status();
  ErrorCode code = ErrorCode::kInternal;
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      code = ErrorCode::kInvalidArgument;
      break;
    case absl::StatusCode::kNotFound:
      code = ErrorCode::kNotFound;
      break;
    case absl::StatusCode::kPermissionDenied:
      code = ErrorCode::kPermissionDenied;
      break;
    case absl::StatusCode::kFailedPrecondition:
      code = ErrorCode::kFailedPrecondition;
      break;
    case absl::StatusCode::kResourceExhausted:
      code = ErrorCode::kResourceExhausted;
      break;
    case absl::StatusCode::kUnimplemented:
      code = ErrorCode::kUnimplemented;
      break;
    case absl::StatusCode::kDataLoss:
      code = ErrorCode::kDataLoss;
      break;
    case absl::StatusCode::kUnavailable:
      code = ErrorCode::kUnavailable;
      break;
    default:
      code = ErrorCode::kInternal;
      break;
  }
  return Status(code, std::string(s.message()));
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

LatencySummary to_public(const engine::serving::LatencyStats& s) {
  return LatencySummary{s.num_samples, s.mean_ms, s.p50_ms, s.p99_ms};
}

Metrics to_public(const engine::serving::RunMetrics& m) {
  Metrics out;
  out.num_requests = m.num_requests;
  out.num_completed_requests = m.num_completed_requests;
  out.num_output_tokens = m.num_output_tokens;
  out.duration_s = m.duration_s;
  out.output_tokens_per_s = m.output_tokens_per_s;
  out.ttft = to_public(m.ttft);
  out.itl = to_public(m.itl);
  out.device_busy_pct = m.device_busy_pct;
  out.moe_balance = m.moe_balance;
  return out;
}

// Calls a host callback. The engine turns a std::exception thrown by a callback into its
// error (the run fails with "<name> callback threw: <what>"); anything else thrown is made one.
template <typename F>
void rethrow_as_std(const char* name, F&& call) {
  try {
    call();
  } catch (const std::exception&) {
    throw;
  } catch (...) {
    throw std::runtime_error(std::string("the host's ") + name +
                             " callback threw an exception not derived from std::exception");
  }
}

// The detokenizer of one request's stream (engine/model/text_stream.hpp: a window after the
// prompt's last 4 tokens, incomplete UTF-8 held back); no stop strings.
engine::model::TextStream make_detokenizer(const engine::model::Tokenizer* tokenizer,
                                           const std::vector<int32_t>& prompt) {
  constexpr size_t kContextTokens = 4;
  const size_t from = prompt.size() > kContextTokens ? prompt.size() - kContextTokens : 0;
  return engine::model::TextStream(
      [tokenizer](const std::vector<int32_t>& ids) {
        return tokenizer != nullptr ? tokenizer->decode(ids) : std::string();
      },
      std::vector<int32_t>(prompt.begin() + static_cast<std::ptrdiff_t>(from), prompt.end()), {});
}

}  // namespace

// A type of Engine::Impl's members, so not in the anonymous namespace (GCC's
// -Wsubobject-linkage: a member of a class with linkage must not have a type without it);
// hidden like everything here but the public API.
namespace api_internal {

// One accepted (or being submitted) request. `mutex` is held by submit until `id` is set and
// by the callbacks (engine thread) and shutdown while they touch the rest.
struct RequestState {
  std::mutex mutex;
  RequestId id = -1;  // -1 until the internal submit accepted it
  StreamCallbacks user;
  engine::model::TextStream detok;
  std::vector<TokenId> prompt;
  std::vector<TokenId> tokens;  // streamed so far
  Clock::time_point submitted = Clock::now();
  Clock::time_point first_token;
  bool finished = false;

  RequestState(const engine::model::Tokenizer* tokenizer, std::vector<TokenId> prompt_tokens,
               StreamCallbacks callbacks)
      : user(std::move(callbacks)),
        detok(make_detokenizer(tokenizer, prompt_tokens)),
        prompt(std::move(prompt_tokens)) {}

  // Marks the request finished and returns its callbacks (for the one on_finish call), keeping
  // nothing else: the engine holds this state for as long as it runs, so a finished request
  // must stay a small record.
  StreamCallbacks finish() {
    finished = true;
    prompt = {};
    tokens = {};
    detok = make_detokenizer(nullptr, {});
    StreamCallbacks out = std::move(user);
    user = StreamCallbacks{};
    return out;
  }
};

}  // namespace api_internal

using api_internal::RequestState;

struct __attribute__((visibility("hidden"))) Engine::Impl {
  std::unique_ptr<actors::Server> server;          // outlives `serving`
  std::unique_ptr<actors::ServingEngine> serving;  // destroyed first
  EngineInfo info;

  std::atomic<bool> stopping{false};  // set once shutdown begins (read by callbacks)

  std::mutex mutex;  // guards the fields below
  bool shut_down = false;
  uint64_t next_key = 0;
  std::map<uint64_t, std::shared_ptr<RequestState>> live;  // accepted or being submitted

  const engine::model::Tokenizer* tokenizer() const { return server->tokenizer(); }
  static absl::Status shutdown_status() {
    return absl::FailedPreconditionError("the engine was shut down before the request finished");
  }
  Status no_tokenizer() const {
    return Status(ErrorCode::kFailedPrecondition,
                  info.topology +
                      ": the model has no tokenizer.model; submit token ids with "
                      "submit_tokens");
  }

  // Builds the completion of `st` (its mutex held) from the engine's output.
  Completion completion(const RequestState& st, const actors::RequestOutput& out,
                        const absl::Status& status) const {
    Completion c;
    c.id = st.id;
    c.status = to_status(status);
    c.prompt_tokens = st.prompt;
    // After a failure the engine may report an empty output: keep what was streamed.
    c.tokens = out.output.size() >= st.tokens.size() ? out.output : st.tokens;
    c.text = st.detok.text() + st.detok.held();  // an incomplete character at the end too
    if (!status.ok()) {
      c.reason = FinishReason::kError;
    } else if (out.cancelled) {
      c.reason = FinishReason::kCancelled;
    } else if (out.finish_reason == actors::FinishReason::kRejected) {
      c.reason = FinishReason::kRejected;
    } else if (out.finish_reason == actors::FinishReason::kEos) {
      c.reason = FinishReason::kStop;
    } else {
      c.reason = FinishReason::kLength;
    }
    const Clock::time_point now = Clock::now();
    if (out.finish_s >= 0 && out.arrival_s >= 0 && status.ok()) {
      c.latency_ms = (out.finish_s - out.arrival_s) * 1e3;
      c.time_to_first_token_ms =
          out.first_token_s >= 0 ? (out.first_token_s - out.arrival_s) * 1e3 : -1.0;
    } else {
      c.latency_ms = ms_between(st.submitted, now);
      c.time_to_first_token_ms =
          st.tokens.empty() ? -1.0 : ms_between(st.submitted, st.first_token);
    }
    return c;
  }

  // The internal callbacks of one request (run on the coordinator's thread).
  actors::RequestCallbacks callbacks_for(const std::shared_ptr<RequestState>& st, uint64_t key) {
    actors::RequestCallbacks cb;
    cb.on_token = [st](int32_t token) {
      RequestId id;
      std::string piece;
      {
        std::lock_guard<std::mutex> lock(st->mutex);
        if (st->finished) return;
        if (st->tokens.empty()) st->first_token = Clock::now();
        st->tokens.push_back(token);
        piece = st->detok.push(token);
        id = st->id;
      }
      if (st->user.on_token) {
        rethrow_as_std("on_token", [&] { st->user.on_token(id, token, piece); });
      }
    };
    cb.on_finish = [this, st, key](const actors::RequestOutput& out, const absl::Status& status) {
      // While shutdown stops the actors, the coordinator may see a stage go first and fail
      // the requests still running: for the host that is the shutdown, not an engine error.
      const bool by_shutdown = !status.ok() && stopping.load();
      Completion c;
      StreamCallbacks user;
      {
        std::lock_guard<std::mutex> lock(st->mutex);
        if (st->finished) return;
        c = completion(*st, out, by_shutdown ? shutdown_status() : status);
        if (by_shutdown) c.reason = FinishReason::kShutdown;
        user = st->finish();
      }
      {
        std::lock_guard<std::mutex> lock(mutex);
        live.erase(key);
      }
      if (user.on_finish) rethrow_as_std("on_finish", [&] { user.on_finish(c); });
    };
    return cb;
  }

  Result<RequestId> submit(std::vector<TokenId> prompt, std::string prompt_text,
                           const GenerationParams& params, StreamCallbacks callbacks) {
    if (params.max_tokens < 1) {
      return Status(
          ErrorCode::kInvalidArgument,
          absl::StrFormat("GenerationParams.max_tokens must be >= 1, got %d", params.max_tokens));
    }
    if (prompt.empty()) return Status(ErrorCode::kInvalidArgument, "the prompt is empty");
    for (size_t j = 0; j < prompt.size(); ++j) {
      if (prompt[j] < 0 || prompt[j] >= info.vocab_size) {
        return Status(ErrorCode::kInvalidArgument,
                      absl::StrFormat("prompt token %d at index %d is outside the vocabulary "
                                      "[0, %d)",
                                      prompt[j], j, info.vocab_size));
      }
    }
    if (static_cast<int64_t>(prompt.size()) >= info.max_position_embeddings) {
      return Status(ErrorCode::kInvalidArgument,
                    absl::StrFormat("the prompt has %d tokens; the model takes fewer than "
                                    "max_position_embeddings = %d",
                                    prompt.size(), info.max_position_embeddings));
    }
    engine::serving::Request request;
    request.prompt = prompt;
    request.prompt_text = std::move(prompt_text);
    request.max_new_tokens = params.max_tokens;
    if (params.temperature || params.top_p || params.seed || params.stop_at_eos) {
      engine::topology::SamplingSpec sampling = server->topology().sampling;
      if (params.temperature) sampling.temperature = *params.temperature;
      if (params.top_p) sampling.top_p = *params.top_p;
      if (params.seed) {
        sampling.seed = *params.seed;
        sampling.key_by_request = false;
      }
      if (params.stop_at_eos) sampling.stop_at_eos = *params.stop_at_eos;
      request.sampling = sampling;
    }
    auto st = std::make_shared<RequestState>(tokenizer(), std::move(prompt), std::move(callbacks));
    uint64_t key = 0;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (shut_down) return Status(ErrorCode::kFailedPrecondition, "the engine was shut down");
      key = next_key++;
      live.emplace(key, st);
    }
    absl::StatusOr<int64_t> id;
    {
      // Held until the id is known: a callback of this request waits for it.
      std::lock_guard<std::mutex> lock(st->mutex);
      id = serving->submit(std::move(request), callbacks_for(st, key));
      if (id.ok()) st->id = *id;
    }
    if (!id.ok()) {
      std::lock_guard<std::mutex> lock(mutex);
      live.erase(key);
      return to_status(id.status());
    }
    return *id;
  }

  // Loads the topology's model and starts its engine.
  static Result<std::unique_ptr<Impl>> open(engine::topology::Topology topology) {
    // The devices of [[cluster.workers]] run in those `muflow worker` processes, which this
    // process drives as `muflow serve` does (the cluster secret: [cluster] token_file, else
    // $MUFLOW_CLUSTER_TOKEN). Checked before the model loads: addresses, the secret.
    std::shared_ptr<actors::ProcessGroup> group;
    if (!topology.workers.empty()) {
      absl::StatusOr<std::shared_ptr<actors::ProcessGroup>> driver =
          actors::cluster::make_cluster_driver(topology);
      if (!driver.ok()) return to_status(driver.status());
      group = std::move(*driver);
    }
    auto impl = std::make_unique<Impl>();
    absl::StatusOr<std::unique_ptr<actors::Server>> server =
        actors::Server::create(std::move(topology));
    if (!server.ok()) return to_status(server.status());
    impl->server = std::move(*server);
    if (group) impl->server->set_process_group(std::move(group));
    absl::StatusOr<std::unique_ptr<actors::ServingEngine>> serving =
        actors::ServingEngine::start(*impl->server);
    if (!serving.ok()) return to_status(serving.status());
    impl->serving = std::move(*serving);

    const engine::topology::Topology& t = impl->server->topology();
    const engine::model::ModelConfig& config = impl->server->config();
    const engine::model::Tokenizer* tok = impl->server->tokenizer();
    EngineInfo& info = impl->info;
    info.topology = t.source;
    info.wiring = t.wiring;
    info.backend = t.backend;
    info.num_devices = static_cast<int64_t>(t.devices.size());
    info.vocab_size = config.vocab_size;
    info.max_position_embeddings = config.max_position_embeddings;
    info.has_tokenizer = tok != nullptr;
    info.bos_id =
        tok && tok->bos_id() >= 0 ? tok->bos_id() : static_cast<TokenId>(config.bos_token_id);
    info.eos_id = static_cast<TokenId>(config.eos_token_id);
    return impl;
  }

  Status shutdown() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (shut_down) return Status();
      shut_down = true;
      stopping.store(true);
    }
    // Stops every actor: no callback runs after this returns.
    const absl::Status stopped = serving->shutdown();
    std::map<uint64_t, std::shared_ptr<RequestState>> left;
    {
      std::lock_guard<std::mutex> lock(mutex);
      left.swap(live);
    }
    const absl::Status why = shutdown_status();
    for (auto& [key, st] : left) {
      Completion c;
      StreamCallbacks user;
      {
        std::lock_guard<std::mutex> lock(st->mutex);  // waits for a submit in progress
        if (st->finished || st->id < 0) continue;     // id < 0: its submit fails instead
        c = completion(*st, actors::RequestOutput{}, why);
        c.reason = FinishReason::kShutdown;
        user = st->finish();
      }
      if (user.on_finish) {
        try {
          user.on_finish(c);
        } catch (...) {
          // Shutting down: a throwing callback cannot fail anything more.
        }
      }
    }
    return to_status(stopped);
  }
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Engine::~Engine() {
  if (impl_) (void)impl_->shutdown();
}

namespace {

// Runs `f`, turning an escaping exception (out of memory while loading, a bug) into an error.
template <typename F>
auto guarded(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return Status(ErrorCode::kResourceExhausted, std::string(what) + ": out of memory");
  } catch (const std::exception& e) {
    return Status(ErrorCode::kInternal, std::string(what) + ": " + e.what());
  }
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::open(const std::string& topology_file) {
  return guarded("muflow::Engine::open", [&]() -> Result<std::unique_ptr<Engine>> {
    if (topology_file.empty()) {
      return Status(ErrorCode::kInvalidArgument, "the topology file path is empty");
    }
    absl::StatusOr<engine::topology::Topology> topology =
        engine::topology::parse_topology_file(topology_file);
    if (!topology.ok()) return to_status(topology.status());
    Result<std::unique_ptr<Impl>> impl = Impl::open(std::move(*topology));
    if (!impl.ok()) return impl.status();
    return std::unique_ptr<Engine>(new Engine(std::move(impl).value()));
  });
}

Result<std::unique_ptr<Engine>> Engine::open_default() {
  return guarded("muflow::Engine::open_default", [&]() -> Result<std::unique_ptr<Engine>> {
    absl::StatusOr<engine::topology::Topology> topology = engine::topology::default_topology();
    if (!topology.ok()) return to_status(topology.status());
    Result<std::unique_ptr<Impl>> impl = Impl::open(*std::move(topology));
    if (!impl.ok()) return impl.status();
    return std::unique_ptr<Engine>(new Engine(std::move(impl).value()));
  });
}

Result<RequestId> Engine::submit(std::string_view prompt, const GenerationParams& params,
                                 StreamCallbacks callbacks) {
  return guarded("muflow::Engine::submit", [&]() -> Result<RequestId> {
    const engine::model::Tokenizer* tok = impl_->tokenizer();
    if (!tok) return impl_->no_tokenizer();
    return impl_->submit(tok->encode(prompt, /*add_bos=*/true), std::string(prompt), params,
                         std::move(callbacks));
  });
}

Result<RequestId> Engine::submit_tokens(std::vector<TokenId> prompt, const GenerationParams& params,
                                        StreamCallbacks callbacks) {
  return guarded("muflow::Engine::submit_tokens", [&]() -> Result<RequestId> {
    return impl_->submit(std::move(prompt), std::string(), params, std::move(callbacks));
  });
}

void Engine::cancel(RequestId id) {
  try {
    impl_->serving->cancel(id);
  } catch (...) {
    // cancel only sends a message; nothing to report (documented as fire-and-forget).
  }
}

Result<Metrics> Engine::wait() {
  return guarded("muflow::Engine::wait", [&]() -> Result<Metrics> {
    {
      std::lock_guard<std::mutex> lock(impl_->mutex);
      if (impl_->shut_down) {
        return Status(ErrorCode::kFailedPrecondition, "the engine was shut down");
      }
    }
    absl::StatusOr<actors::RunOutcome> outcome = impl_->serving->drain();
    if (!outcome.ok() && impl_->stopping.load()) {
      // Shut down by another thread while waiting (the coordinator stopped).
      return Status(ErrorCode::kFailedPrecondition, "the engine was shut down");
    }
    if (!outcome.ok()) return to_status(outcome.status());
    return to_public(outcome->metrics);
  });
}

Result<std::int64_t> Engine::kv_cache_bytes() {
  return guarded("muflow::Engine::kv_cache_bytes", [&]() -> Result<std::int64_t> {
    absl::StatusOr<int64_t> bytes = impl_->serving->kv_cache_bytes();
    if (!bytes.ok()) return to_status(bytes.status());
    return *bytes;
  });
}

Result<std::vector<TokenId>> Engine::tokenize(std::string_view text, bool add_bos) const {
  return guarded("muflow::Engine::tokenize", [&]() -> Result<std::vector<TokenId>> {
    const engine::model::Tokenizer* tok = impl_->tokenizer();
    if (!tok) return impl_->no_tokenizer();
    return tok->encode(text, add_bos);
  });
}

Result<std::string> Engine::detokenize(const std::vector<TokenId>& tokens) const {
  return guarded("muflow::Engine::detokenize", [&]() -> Result<std::string> {
    const engine::model::Tokenizer* tok = impl_->tokenizer();
    if (!tok) return impl_->no_tokenizer();
    for (size_t j = 0; j < tokens.size(); ++j) {
      if (tokens[j] < 0 || tokens[j] >= tok->vocab_size()) {
        return Status(ErrorCode::kInvalidArgument,
                      absl::StrFormat("token %d at index %d is outside the vocabulary [0, %d)",
                                      tokens[j], j, tok->vocab_size()));
      }
    }
    return tok->decode(tokens);
  });
}

const EngineInfo& Engine::info() const { return impl_->info; }

Status Engine::shutdown() {
  try {
    return impl_->shutdown();
  } catch (const std::exception& e) {
    return Status(ErrorCode::kInternal, std::string("muflow::Engine::shutdown: ") + e.what());
  }
}

static_assert(MUFLOW_VERSION_MAJOR == MUFLOW_PROJECT_VERSION_MAJOR &&
                  MUFLOW_VERSION_MINOR == MUFLOW_PROJECT_VERSION_MINOR &&
                  MUFLOW_VERSION_PATCH == MUFLOW_PROJECT_VERSION_PATCH,
              "include/muflow/export.hpp's MUFLOW_VERSION_* differ from project(VERSION) in "
              "CMakeLists.txt");

const char* version() { return MUFLOW_PROJECT_VERSION; }

}  // namespace muflow
