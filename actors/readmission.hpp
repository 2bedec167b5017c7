#pragma once
/// \file
/// Re-admitting the requests of a run that lost a worker (#18 item 5), shared by the batch
/// run (Server::run, actors/server_recovery.cpp) and the long-lived engine
/// (ServingEngine, actors/serving_engine.cpp): a request taken and unfinished is served again
/// under its id with its prompt followed by the tokens it had generated (re-prefilled), and
/// its output is then shown as one run's.
///
/// Why the continuation equals a fault-free run's: the kernels are batch-invariant (a row's
/// result does not depend on the batch or chunk it ran in), so re-prefilling positions
/// 0..p-1 gives the KV rows and logits that decoding them one at a time gave; the next token
/// is sampled from the same logits with the same (seed, request id, position) draw.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "actors/coordinator.hpp"
#include "engine/serving/request.hpp"

namespace muflow::actors {

/// A request a run took and that has not finished, with what it streamed so far.
/// Owned by its run's host side; not thread-safe.
struct ResumableRequest {
  /// As first taken: its id, prompt, options, arrival (seconds on the run's clock).
  engine::serving::Request request;
  std::vector<int32_t> generated;  ///< every token streamed for it, over all attempts
  size_t resumed_after = 0;  ///< tokens it had when the current attempt re-admitted it (0: none)
  std::chrono::steady_clock::time_point first_token_at{};  ///< when its first token came

  /// Records a streamed token (and the first one's time).
  void on_token(int32_t token) {
    if (generated.empty()) first_token_at = std::chrono::steady_clock::now();
    generated.push_back(token);
  }
};

/// The request to serve in an attempt that starts `offset_s` seconds after the run's start:
/// `r`'s prompt followed by the tokens it generated, max_new_tokens less those, arriving at
/// its own arrival on the attempt's clock (0 when that has passed). Sets `r.resumed_after`.
/// Errors: none (a request with every token generated is finished, so never passed here).
engine::serving::Request readmission(ResumableRequest& r, double offset_s);

/// `out`, a request's output as an attempt that started `offset_s` seconds after the run's
/// start (at `origin` on the steady clock) reports it, as the run's: times moved to the run's
/// clock and, for a request re-admitted in this attempt (`r` not null, `r->resumed_after` >
/// 0), its original prompt, arrival and first-token time, every token it generated over all
/// attempts, and the prompt logits of its original prompt only (the re-prefill returned rows
/// for the re-admitted tokens too).
RequestOutput merged_output(const ResumableRequest* r, const RequestOutput& out, double offset_s,
                            std::chrono::steady_clock::time_point origin);

}  // namespace muflow::actors
