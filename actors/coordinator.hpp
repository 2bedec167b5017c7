#pragma once
/// \file
/// The coordinator actor: admits requests (load balancer over attention DP ranks), runs
/// continuous batching iteration by iteration (chunked prefill + decode), collects sampled
/// tokens, streams them, and owns the run's metrics (ARCHITECTURE.md §3).

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <caf/all.hpp>

#include "absl/status/status.h"
#include "actors/run_context.hpp"
#include "engine/metrics.hpp"
#include "engine/request.hpp"

namespace muflow::actors {

/// What one request produced.
struct RequestOutput {
  int64_t request_id = 0;
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;        ///< generated token ids (EOS included when it stopped there)
  std::vector<float> prompt_logits;   ///< [prompt_len, vocab] when the request asked for them
  double arrival_s = 0, first_token_s = -1, finish_s = -1;  ///< seconds since run start
};

/// The result of one run: status (first error, if any), outputs indexed by request id, metrics.
struct RunOutcome {
  absl::Status status;
  std::vector<RequestOutput> outputs;
  engine::RunMetrics metrics;
};
using RunOutcomePtr = std::shared_ptr<RunOutcome>;

/// Callbacks into the host application. Called from the coordinator actor's thread, one at a
/// time; they must not block for long (they delay the next iteration).
struct RunCallbacks {
  /// A token was generated for a request (streaming).
  std::function<void(int64_t request_id, int32_t token)> on_token;
  /// After every iteration: finished requests, total requests, generated tokens so far.
  std::function<void(int64_t num_finished, int64_t num_requests, int64_t num_tokens)> on_progress;
};

/// Spawns the coordinator for `requests` (sorted by arrival; ids 0..n-1, each once). Send it
/// `(start_atom, reply_to)`; it sends a RunOutcomePtr to `reply_to` when every request finished
/// or a stage failed (a callback that throws fails the run too).
caf::actor spawn_coordinator(caf::actor_system& sys, RunContextPtr ctx,
                             std::vector<engine::Request> requests, RunCallbacks callbacks);

}  // namespace muflow::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(muflow::actors::RunOutcomePtr)
