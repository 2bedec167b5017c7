#pragma once
/// \file
/// The public C++ API of muflow for host applications: open an engine from a topology file,
/// submit prompts from any thread, stream tokens, cancel, wait, read metrics.
///
/// Only standard-library types appear here (no CAF, oneDNN or Abseil), and C++17 suffices to
/// compile against them: link muflow::muflow (`find_package(muflow CONFIG)`) and include
/// <muflow/muflow.hpp>. Errors follow one convention: fallible calls return muflow::Status or
/// muflow::Result<T> (result.hpp); no call throws for bad input. docs/embedding.md has a
/// walk-through.
///
/// Thread model, in short:
///  - An Engine is owned by one std::unique_ptr; destroying it shuts it down.
///  - submit, submit_tokens, cancel, tokenize, detokenize and info may be called from any
///    thread, concurrently. wait, kv_cache_bytes and shutdown may be called from any host
///    thread (not from a callback).
///  - Callbacks run on the engine's threads, one at a time (never two concurrently for one
///    engine); see StreamCallbacks for what they may and may not do.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "muflow/export.hpp"
#include "muflow/result.hpp"

namespace muflow {

/// A request's id: assigned by Engine::submit, counting up from 0 in submission order per
/// engine.
using RequestId = std::int64_t;
/// A token id of the model's vocabulary, in [0, EngineInfo::vocab_size).
using TokenId = std::int32_t;

/// Per-request generation limits and sampling. A sampling field left unset takes the
/// topology's `[sampling]` value.
struct GenerationParams {
  /// Tokens to generate (>= 1). Generation stops earlier at EOS (when stop_at_eos) or at the
  /// model's max_position_embeddings.
  std::int64_t max_tokens = 16;
  /// Softmax temperature, finite and >= 0 (0 = greedy: argmax, ties to the lowest id).
  std::optional<double> temperature;
  /// Nucleus sampling: the smallest set of most likely tokens whose mass reaches top_p, in
  /// (0, 1].
  std::optional<double> top_p;
  /// Seed of this request's draws. Set: its output depends only on (seed, prompt, params),
  /// not on the request id, so it reproduces across submissions and engines. Unset: the
  /// topology's seed, with the request id mixed in (every request draws differently).
  std::optional<std::uint64_t> seed;
  /// Stop at the model's EOS token (false: generate max_tokens, as vLLM's ignore_eos).
  std::optional<bool> stop_at_eos;
};

/// Why a request ended.
enum class FinishReason {
  kStop,       ///< generated the EOS token (it is the last of Completion::tokens)
  kLength,     ///< generated max_tokens, or reached the model's max_position_embeddings
  kCancelled,  ///< Engine::cancel before it finished (tokens holds what it streamed)
  kError,      ///< the engine failed (Completion::status says why)
  kShutdown,   ///< the engine was shut down (or destroyed) before it finished
  kRejected,   ///< refused at arrival: `[scheduler] max_queued_requests` requests were waiting
};

/// "stop", "length", "cancelled", "error", "shutdown" or "rejected". Any thread.
inline const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
    case FinishReason::kShutdown:
      return "shutdown";
    case FinishReason::kRejected:
      return "rejected";
  }
  return "error";
}

/// What one request produced; handed to StreamCallbacks::on_finish (by const reference,
/// valid during the call: copy what you keep).
struct Completion {
  RequestId id = -1;
  FinishReason reason = FinishReason::kError;
  /// OK, or why the request failed (reason kError) or was dropped (reason kShutdown).
  Status status;
  std::vector<TokenId> prompt_tokens;  ///< [num_prompt_tokens] as the model saw them (BOS first
                                       ///< for text prompts)
  std::vector<TokenId> tokens;         ///< [num_generated] token ids, EOS included when it stopped
                                       ///< there; empty when none was generated
  /// The generated text as it continues the prompt (so it starts with a space when the first
  /// token begins a new word; control tokens such as EOS add nothing). Equals the
  /// concatenation of the pieces on_token streamed, plus an incomplete UTF-8 character left at
  /// the end (rendered as U+FFFD) when generation stopped inside one. Empty when the model
  /// has no tokenizer.
  std::string text;
  /// Milliseconds from submission to the first generated token; -1 when none was generated.
  double time_to_first_token_ms = -1.0;
  /// Milliseconds from submission to the end of the request.
  double latency_ms = 0.0;
};

/// Streaming callbacks of one request. Both are optional.
///
/// Threads: callbacks of all requests run on the engine's threads (its coordinator actor,
/// which CAF may move between worker threads), one at a time and in token order, so a
/// callback needs no lock for state only callbacks touch; state shared with host threads
/// needs its own synchronisation. A callback delays the engine's next step while it
/// runs: it must not block (no waiting on futures, I/O on slow devices, long computation) and
/// must not call Engine::wait, Engine::shutdown, Engine::kv_cache_bytes or destroy the
/// engine (that would wait on the thread that runs it). It may call submit, submit_tokens,
/// cancel, tokenize and detokenize. A callback that throws fails the engine: every
/// unfinished request ends with reason kError and wait() returns the error.
struct StreamCallbacks {
  /// A token was generated for request `id`. `piece` is the UTF-8 text it adds to the output
  /// (may be empty: control tokens, or bytes held back until a multi-byte character is
  /// complete; then a later piece carries them). `piece` is valid during the call only.
  std::function<void(RequestId id, TokenId token, std::string_view piece)> on_token;
  /// The request ended (any FinishReason). Called exactly once for every request submit
  /// accepted, on an engine thread; for a request still running at shutdown it is called
  /// with reason kShutdown before shutdown returns, on an engine thread or on the thread
  /// that calls shutdown (or destroys the engine).
  std::function<void(const Completion& completion)> on_finish;
};

/// Latency summary in milliseconds (percentiles by linear interpolation, as NumPy's default).
struct LatencySummary {
  std::int64_t num_samples = 0;  ///< 0 = nothing measured (the other fields are then 0)
  double mean_ms = 0.0;
  double p50_ms = 0.0;
  double p99_ms = 0.0;
};

/// Serving metrics since the engine was opened (Engine::wait). Cancelled requests count in
/// num_requests and their tokens in num_output_tokens, not in num_completed_requests.
struct Metrics {
  std::int64_t num_requests = 0;            ///< requests submitted and accepted
  std::int64_t num_completed_requests = 0;  ///< requests that finished (EOS or length)
  std::int64_t num_output_tokens = 0;       ///< generated tokens over all requests
  double duration_s = 0.0;                  ///< wall seconds the rate is taken over
  double output_tokens_per_s = 0.0;         ///< num_output_tokens / duration_s
  LatencySummary ttft;                      ///< time to first token, per request
  LatencySummary itl;                       ///< gap between consecutive tokens of a request
  std::vector<double> device_busy_pct;      ///< [num_devices] busy time / duration, in %
  /// Mean over MoE layers and steps of (mean / max expert tokens per device): 1.0 = every
  /// device computed as many expert tokens as the busiest; 1/num_devices = one did all.
  double moe_balance = 0.0;
};

/// What an engine serves (fixed once it is open).
struct EngineInfo {
  std::string topology;                      ///< the topology file's path, or "<embedded default>"
  std::string wiring;                        ///< e.g. "sync", "async"
  std::string backend;                       ///< "cpu"
  std::int64_t num_devices = 0;              ///< (virtual) devices the model is spread over
  std::int64_t vocab_size = 0;               ///< token ids are in [0, vocab_size)
  std::int64_t max_position_embeddings = 0;  ///< prompt + generated tokens stay below this
  TokenId bos_id = -1;                       ///< the BOS token the tokenizer prepends
  TokenId eos_id = -1;                       ///< generation stops after it (stop_at_eos)
  bool has_tokenizer = false;                ///< false: only token-id prompts (synthetic models)
};

/// A long-lived serving engine: one model prepared on the devices of one topology, serving
/// requests submitted while it runs (continuous batching), until shutdown.
///
/// Ownership: created by open / open_default and owned by the returned std::unique_ptr; the
/// destructor calls shutdown(). Thread safety: see the file comment and each method.
class MUFLOW_API Engine {
 public:
  /// Parses the topology file (format: topologies/README.md; relative paths in it resolve
  /// against its folder), loads and prepacks the model it names (and its tokenizer.model,
  /// when the folder has one), and starts the engine's actors. The topology's `[sampling]`
  /// and `[scheduler]` apply to every request; its `[workload]` is not used (prompts come from
  /// submit); a `trace` file it names is written at shutdown. Blocks while the model loads.
  /// Errors: kNotFound (the file or a file it names is missing); kInvalidArgument (malformed
  /// TOML or key, with file:line; a model that does not fit the placement); kUnimplemented (a
  /// wiring or backend this build lacks); kFailedPrecondition (backend "sim", which runs in
  /// virtual time and has no live engine: use the `muflow run` CLI); kResourceExhausted,
  /// kDataLoss (model files). A topology with `[[cluster.workers]]` runs those devices in the
  /// `muflow worker` processes at the addresses it gives (started beforehand, with the
  /// cluster secret of `[cluster] token_file` or `$MUFLOW_CLUSTER_TOKEN`, which this process
  /// needs too; the same model folder on each; actors/cluster/README.md); a lost worker's
  /// devices move to the others while the engine serves. Its errors: kInvalidArgument (an
  /// address without a port), kFailedPrecondition (no cluster secret set; a worker refuses
  /// the run, e.g. its model folder is missing: the message says why), kPermissionDenied (a
  /// worker refuses the secret), kUnavailable (a worker cannot be reached). Any thread.
  static Result<std::unique_ptr<Engine>> open(const std::string& topology_file);

  /// The embedded default topology, the one `muflow run` serves without a file: the trained
  /// KJV model shipped with muflow (`kjv-mixtral-tiny-bf16`, with its tokenizer) on 2 virtual
  /// CPU devices, sync wiring, greedy sampling that stops at EOS. The model folder is looked
  /// for in $MUFLOW_MODELS_DIR, then in ../share/muflow/models next to the running
  /// executable, then in the source tree muflow was built from. Errors: kNotFound when it is
  /// not found (the message lists the places looked in); otherwise as open. Any thread.
  static Result<std::unique_ptr<Engine>> open_default();

  /// Shuts the engine down (see shutdown). Must not run on a callback's thread.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Submits a text prompt: it is tokenized as `tokenize(prompt, true)` (BOS, then the
  /// SentencePiece pieces of the UTF-8 text) and enters the running batch at once. Returns
  /// its id. `callbacks` are moved into the engine and called as StreamCallbacks says.
  /// Errors (nothing is called back then): kFailedPrecondition when the model has no
  /// tokenizer or after shutdown; kInvalidArgument when max_tokens < 1, the prompt has
  /// max_position_embeddings tokens or more, or a temperature (non-finite or < 0) or top_p
  /// (outside (0, 1]) is out of range. Any thread, concurrently.
  Result<RequestId> submit(std::string_view prompt, const GenerationParams& params,
                           StreamCallbacks callbacks = {});

  /// Submits a prompt of token ids ([num_prompt_tokens], each in [0, vocab_size), at least
  /// one; no BOS is added). Errors as submit, plus kInvalidArgument for an empty prompt or
  /// an id outside the vocabulary. Any thread, concurrently.
  Result<RequestId> submit_tokens(std::vector<TokenId> prompt, const GenerationParams& params,
                                  StreamCallbacks callbacks = {});

  /// Cancels request `id`: it streams no more tokens, its on_finish reports kCancelled with
  /// what it generated, and its KV cache is freed as soon as no step of it is in flight.
  /// Returns at once. Ids that are unknown, already finished or cancelled are ignored. Any
  /// thread, callbacks included.
  void cancel(RequestId id);

  /// Blocks until every request submitted so far (and any submitted while it waits) has
  /// ended and its on_finish returned, then returns the metrics since open. Errors: the
  /// engine's failure (a stage, or a callback that threw; requests submitted after that end at
  /// once with reason kError: shut the engine down): kInternal, or kResourceExhausted when a
  /// request could not fit any attention rank's KV cache; kFailedPrecondition after shutdown.
  /// Any host thread, never a callback.
  Result<Metrics> wait();

  /// Bytes held now by the KV caches of all attention stages (0 when no request is running
  /// and none was cancelled with a step in flight). Errors: kFailedPrecondition after
  /// shutdown; kInternal when a stage does not answer within 10 s. Any host thread, never a
  /// callback.
  Result<std::int64_t> kv_cache_bytes();

  /// Token ids of `text` (UTF-8), with bos_id prepended when `add_bos`; never EOS. Errors:
  /// kFailedPrecondition when the model has no tokenizer. Any thread.
  Result<std::vector<TokenId>> tokenize(std::string_view text, bool add_bos = true) const;

  /// Text of `tokens` (control tokens such as BOS/EOS render as nothing; a leading word
  /// space is dropped). Errors: kFailedPrecondition when the model has no tokenizer;
  /// kInvalidArgument for an id outside [0, vocab_size). Any thread.
  Result<std::string> detokenize(const std::vector<TokenId>& tokens) const;

  /// What this engine serves. The reference stays valid while the engine lives. Any thread.
  const EngineInfo& info() const;

  /// Stops the engine: every actor stops, the topology's trace file is written if it names
  /// one, and every request still running gets its on_finish (reason kShutdown) before this
  /// returns. Blocks until then (milliseconds). Later submit, wait and kv_cache_bytes fail
  /// with kFailedPrecondition; cancel does nothing. Idempotent (later calls return OK).
  /// Errors: the trace writer's (the engine is stopped regardless). Any host thread, never a
  /// callback.
  Status shutdown();

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// The library's version, "MAJOR.MINOR.PATCH" (compare with MUFLOW_VERSION_* of the headers
/// the application was compiled with). Any thread.
MUFLOW_API const char* version();

}  // namespace muflow
