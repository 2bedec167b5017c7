#pragma once
/// \file
/// The executor a device owns (ARCHITECTURE.md §4): what running a stage means on a backend.
/// The cpu executor does the real math; the sim executor does no math, routes tokens with a
/// router model and returns a modeled duration. Stage actors call the same interface on every
/// backend, so the actor code is shared.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/dataflow/token_batch.hpp"
#include "engine/exec/device_activity.hpp"
#include "engine/serving/kv_cache.hpp"
#include "engine/topology/topology.hpp"

namespace muflow::engine::exec {

/// Outputs of an attention stage for `n` rows (widths per Executor::activation_width()).
struct AttentionResult {
  float* x = nullptr;             ///< [n, width] expert input rows (nothing when width is 0)
  int32_t* topk_ids = nullptr;    ///< [n, num_topk]
  float* topk_weights = nullptr;  ///< [n, num_topk]
  float* shared = nullptr;        ///< [n, width] gated shared-expert rows, or nullptr
};

/// Runs stages for one device. Owned by the run (one per device); called only from the stage
/// actors of that device, one stage at a time (the device grants one at a time), so an
/// implementation need not be thread-safe across its own calls; different devices' executors
/// may run concurrently on the cpu backend.
class Executor {
 public:
  virtual ~Executor() = default;

  /// Floats per activation row carried between stages: hidden_size on real backends, 0 in
  /// simulation (token batches then carry metadata only).
  virtual int64_t activation_width() const = 0;
  /// True when durations are modeled (virtual time), false when they are measured.
  virtual bool virtual_time() const = 0;

  /// Block 0 input: the residual stream of `tokens` (their token ids) into h [n, width].
  virtual void embed(const std::vector<dataflow::TokenMeta>& tokens, float* h) = 0;
  /// The attention half of `block` for `tokens` (positions continue each request's cache in
  /// `kv`); h [n, width] in/out. `seconds` receives the modeled duration (0 when measured).
  /// Errors: FailedPrecondition when a position does not continue its request's KV cache.
  virtual absl::Status attention(int64_t block, serving::KvCache& kv,
                                 const std::vector<dataflow::TokenMeta>& tokens, float* h,
                                 const AttentionResult& out, double* seconds) = 0;
  /// One expert over `n` rows: y [n, width] from x [n, width].
  virtual void expert(int64_t block, int64_t expert, const float* x, int64_t n, float* y,
                      double* seconds) = 0;
  /// MoEShard: shard `shard` of `num_shards` (engine/planning/moeshard_plan.hpp) of one expert over
  /// `n` rows: y [n, width] is the shard's partial output (the expert's output is the sum
  /// over shards). Backends without shards prepared abort (the wiring prepares them).
  virtual void expert_shard(int64_t block, int64_t expert, int64_t shard, int64_t num_shards,
                            const float* x, int64_t n, float* y, double* seconds) = 0;
  /// Final norm, LM head and sampling for `rows` (h [rows.size(), width]): token[i] is the next
  /// token after rows[i] (position + 1) where rows[i] asks for kSample, else -1; logits[i] is
  /// filled [vocab] where it asks for kNeedsLogits. sampling[i] is row i's parameters
  /// (sampling.size() == rows.size()).
  virtual void sample(const std::vector<dataflow::TokenMeta>& rows, const float* h,
                      const std::vector<topology::SamplingSpec>& sampling, std::vector<int32_t>* tokens,
                      std::vector<std::vector<float>>* logits, double* seconds) = 0;
  /// Modeled host seconds one stage run of `kind` on `num_tokens` tokens spends beyond its
  /// kernels (merging its μ-queue, assembling inputs, scattering outputs), added to the run's
  /// modeled duration. Default 0: real backends measure it; the sim returns the calibrated
  /// in-run host time of `[cost] kernels` (kernels/sim/measured_kernels.hpp, host_* rows),
  /// a correction that may be negative (the caller keeps the run's duration >= 0).
  virtual double stage_host_seconds(dataflow::StageKind kind, int64_t num_tokens) const {
    return 0.0;
  }
  /// Log standard deviation of a modeled stage run's duration of `kind` around its mean (the
  /// caller draws each run's factor: engine/exec/run_spread.hpp). Default 0 (real backends
  /// take their own time); the sim: the `# spread_<kind>=` metadata of `[cost] kernels`.
  virtual double run_spread(dataflow::StageKind kind) const { return 0.0; }
  /// Modeled host seconds of one dispatch (`dispatch` true) or combine barrier moving `rows`
  /// rows, from its last source run's end to its destinations' runs (the contribution's hop to
  /// the collective included); the collective delays its deliveries by it.
  /// Default 0 (real backends take it); the sim: the host_dispatch / host_combine rows of
  /// `[cost] kernels`. Called from the collective actors (the sim runs them on one thread).
  virtual double barrier_host_seconds(bool dispatch, int64_t rows) const { return 0.0; }
  /// Modeled host seconds of one grant by this device's device actor: from the `done` (or
  /// `ready`) that asks for it to the granted stage's start, two actor hand-offs. The device
  /// actor delays its grants by it; a stage that starts on an idle device without asking
  /// (actors/device_gate.hpp) pays none. Default 0 (real backends take it); the sim: the
  /// host_grant row of `[cost] kernels`. Called from the device actors (one thread in the sim).
  virtual double grant_host_seconds() const { return 0.0; }
  /// A stage tells its device's executor when it starts running on it (true) and when its run
  /// ends (false). Unlike the methods above, it is called from the stage actors, possibly
  /// while another actor of this device runs on another thread: the
  /// default does nothing (real backends); the sim, whose actors all run on one thread,
  /// records it in the run's DeviceActivity (engine/exec/device_activity.hpp), which
  /// contention-dependent kernel times read.
  /// `now_s`: the run's virtual time (seconds since its start) where the clock is virtual.
  virtual void set_device_busy(bool busy, double now_s) {}
  /// The sim: the contended work of the expert calls since the last take (their times with
  /// no peer busy and with all busy, and what they were charged), for a shared run
  /// (DeviceActivity::start_shared); zero work where the calls' time does not depend on the
  /// peers (no `expert_alone` rows, alone equal to shared) and on real backends.
  virtual DeviceActivity::SharedWork take_shared_work() { return {}; }
  /// The sim: the run's DeviceActivity this executor's device belongs to; null elsewhere.
  virtual DeviceActivity* activity() { return nullptr; }
  /// Brings this executor's own copy of `kv`'s rows of `request_ids` up to the host cache,
  /// for a backend that keeps one (cuda: the device KV cache, engine/exec/cuda_kv_cache.hpp),
  /// and waits for it. attention does this by itself for its rows; calibration calls it
  /// before timing a call so that the copy is not timed. Default: nothing (the host cache is
  /// the cache). Errors: the copy's (cuda: out of device memory).
  virtual absl::Status sync_kv(const serving::KvCache& kv,
                               const std::vector<int64_t>& request_ids) {
    return absl::OkStatus();
  }
};

}  // namespace muflow::engine::exec
