#pragma once
/// \file
/// Stage actors: one per layer actor (attention per block and DP rank, expert per block and
/// expert, sampler per DP rank). The actor owns the μ-queue; what the stage computes and where
/// its outputs go is a StageImpl (ARCHITECTURE.md §3).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "absl/status/status.h"
#include "actors/messages.hpp"
#include "actors/run_context.hpp"
#include "actors/send.hpp"

namespace muflow::actors {

/// What one run of a stage processed (for the trace slice).
struct RunInfo {
  int64_t num_tokens = 0;
  /// Distinct requests among the tokens; counted only when the run records a trace (its one
  /// reader), 0 otherwise (a sort per stage run, #19 item 6).
  int64_t num_requests = 0;
  int64_t iteration = 0;
  double seconds = 0.0;  ///< modeled duration (virtual time); 0 when the run is measured
};

/// Number of distinct request ids in `tokens`.
int64_t count_requests(const std::vector<engine::dataflow::TokenMeta>& tokens);

/// The computation and the wiring of one stage. Owned by exactly one stage actor, called only
/// from that actor (never concurrently).
class StageImpl {
 public:
  virtual ~StageImpl() = default;
  /// Queues an incoming batch (the μ-queue). Appends to `now` the messages to send
  /// immediately (e.g. an empty iteration's contribution to a barrier). Errors: malformed
  /// input (invariant breaches between actors).
  virtual absl::Status enqueue(const engine::dataflow::TokenBatchPtr& batch,
                               std::vector<Send>& now) = 0;
  /// Tokens that can run now (0 = nothing to grant).
  virtual int64_t ready_tokens() const = 0;
  /// Runs one batch from the queue, appends the output messages to `out`, and describes what
  /// it ran in `info` (for the trace slice). Errors: a failed merge or KV append; the stage
  /// actor then stops and the run fails.
  virtual absl::Status run(std::vector<Send>& out, RunInfo& info) = 0;
  /// Bytes held in this stage's KV cache, or -1 when it has none (traced as a counter).
  virtual int64_t kv_bytes() const { return -1; }
  /// Frees per-request state (KV cache). Default: nothing.
  virtual void release(int64_t request_id) {}
  /// Appends K/V rows another rank's stage of the same block computed (a KV replica).
  /// Errors: stages without a KV cache, rows out of position order.
  virtual absl::Status apply_kv_rows(const KvRows& rows) {
    return absl::InvalidArgumentError(name() + ": has no KV cache to replicate into");
  }
  /// Display name, e.g. "attn b3 r1", "expert b3 e5", "sampler r1".
  virtual std::string name() const = 0;
  virtual engine::dataflow::LayerId layer() const = 0;
};

/// Spawns a stage actor that owns `impl`, lives on device `device_index` and is the
/// `local_index`-th stage registered on that device. `trace_tid` is its thread id in traces.
caf::actor spawn_stage(caf::actor_system& sys, RunContextPtr ctx, std::shared_ptr<StageImpl> impl,
                       int64_t device_index, int32_t local_index, int64_t trace_tid);

}  // namespace muflow::actors
