#pragma once
/// \file
/// Runs a workload against a server: every request is sent at its arrival time (the same
/// requests `muflow run` serves in-process, from engine/serving/workload.hpp: prompts, ids,
/// Poisson arrivals, Azure trace), as a streaming completion of its prompt's token ids, with
/// an optional cap on requests in flight, and each request's record is handed over as it
/// finishes.
///
/// Scheduling follows vLLM's benchmark (vllm-project/vllm, vllm/benchmarks/serve.py,
/// `benchmark`, commit def9ce85ba1079af970a58ed3d42dd861ae35d58): a request that arrives
/// while max_concurrency requests are in flight waits for one to finish, and its timing
/// starts when it is sent, not when it arrived (RequestRecord keeps both); the benchmark
/// duration runs from the start until the last request finished.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/serving/request.hpp"
#include "http/client/base_url.hpp"
#include "http/client/openai_stream_client.hpp"

namespace muflow::http::client {

/// The most requests in flight at once when no cap is given: each in-flight request holds
/// one thread and one connection.
inline constexpr int64_t kMaxInFlightRequests = 1024;

/// How to run a workload.
struct LoadOptions {
  std::string model;  ///< "model" of every request (non-empty)
  /// Most requests in flight at once (>= 0); 0 = no cap but kMaxInFlightRequests, which
  /// also bounds larger values.
  int64_t max_concurrency = 0;
  ClientOptions client;      ///< timeouts and API key of every connection
  bool ignore_eos = true;    ///< "ignore_eos": every request generates its max_new_tokens
  double temperature = 0.0;  ///< "temperature"
};

/// One request's outcome. Times are seconds since the start of the run (steady clock).
struct RequestRecord {
  int64_t id = 0;                 ///< engine::serving::Request::id
  double scheduled_s = 0.0;       ///< its arrival time in the workload
  int64_t num_prompt_tokens = 0;  ///< token ids sent
  int64_t max_tokens = 0;         ///< "max_tokens" sent
  CompletionResult result;        ///< result.start_s >= scheduled_s (later when it waited)
};

/// Called once per request as it finishes, from the worker thread that ran it; calls never
/// overlap (they hold the runner's lock, so keep them short: write a line, count). Must not
/// throw (it runs on a worker thread).
using RecordSink = std::function<void(const RequestRecord&)>;

/// A finished run.
struct LoadRun {
  std::vector<RequestRecord> records;  ///< one per request, in the order of `requests`
  double duration_s = 0.0;             ///< start to the last request's end, seconds
  int64_t max_in_flight = 0;           ///< most requests that were in flight at once
};

/// Sends every request of `requests` to `url` at its arrival_s (seconds after this call
/// starts) and waits for all of them; blocks the calling thread (which only schedules;
/// requests run on worker threads, at most max_concurrency, each with its own
/// OpenAiStreamClient). Failed requests (no connection, HTTP 429, dropped stream, timeouts)
/// are records with result.ok = false, not errors of the run. Errors (nothing is sent):
/// InvalidArgument for an empty model, max_concurrency < 0, a request with an empty prompt,
/// max_new_tokens < 1 or an arrival time outside [0, 1e7] s (or NaN), and the client's
/// option errors; Internal when a worker thread cannot be started (requests sent until
/// then are waited for).
absl::StatusOr<LoadRun> run_http_load(const BaseUrl& url,
                                      const std::vector<engine::serving::Request>& requests,
                                      const LoadOptions& options, const RecordSink& on_record = {});

}  // namespace muflow::http::client
