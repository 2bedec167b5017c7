#pragma once
/// \file
/// Stage kernel times measured on a real backend (`muflow calibrate --backend cpu`), which the
/// sim uses instead of its roofline for the device kind that ran them, so the sim predicts
/// that hardware rather than an idealisation of it (issue #19 item 3).
///
/// File (CSV, written by `muflow calibrate`, one row per measurement as it finishes):
///
///     # muflow calibrate: <free text>
///     # kind=cpu hidden=1024 ffn=2048 heads=16 kv_heads=4 head_dim=64 experts=8 topk=2
///     #   vocab=4096 gated=1 dtype=f32 threads=1 concurrent=2      (one line, key=value)
///     op,tokens,context,width,seconds
///     attention,8,256,0,0.00123
///     ...
///
/// Rows (seconds: median wall time of one call; every size >= 1 unless said otherwise):
///  - `attention,n,c,0,s`: the attention stage (norm, qkv, rope, attention, o, router) for n
///    sequences of one new token each at context c (the new token included; c = 1: first
///    position).
///  - `prefill,P,P,0,s`: the same stage for one sequence of P new tokens from position 0.
///  - `expert,n,0,f,s`: one expert FFN of width f on n rows, timed while the other
///    `concurrent` threads run theirs (as the devices of a barrier wiring do).
///  - `expert_alone,n,0,f,s` (optional): the same with the other threads idle. On a host
///    whose devices share DRAM a weight-streaming run is faster alone (measured on the dev VM:
///    210 µs against 346 µs for 4 rows of a 6 MiB expert); a wiring whose expert device often
///    runs alone (async) sees that time.
///  - `lm_head,n,0,0,s`: final norm, LM head and sampling of n rows.
///  - `stage_overhead,0,0,0,s`: host time per stage run around the runs (actor messages),
///    measured end to end on a tiny model (so it also holds that model's small in-run host
///    time), less that model's own executor calls, which the rows above charge (on cuda an
///    upload, launches, a download and a synchronization each), and its barrier and grant
///    times, which the host_dispatch / host_combine / host_grant rows charge.
///  - `host_attention,n,0,0,s`, `host_expert,n,0,0,s`, `host_sampler,n,0,0,s` (optional): host
///    time inside one stage run of that kind on n tokens beyond its kernels' time (merging the
///    μ-queue's batches, assembling inputs, scattering outputs, allocation), measured in situ:
///    the stage spans of a real run of the model minus the sim's kernel times for the same
///    runs (actors/calibration.hpp). A correction, so it may be negative where runs of that
///    size take less in a run than the kernel rows say (on the 2-core VM a 1-token expert or
///    attention run, 25–50 µs: the kernel rows time both devices running the same call);
///    the sim never makes a run shorter than 0.
///  - `host_dispatch,n,0,0,s`, `host_combine,n,0,0,s` (optional, >= 0): host time of one
///    dispatch or combine barrier moving n rows, from its last source run's end to its first
///    destination's run (the contribution's hop to the collective, the collective's
///    concatenation, the delivery of the batches), measured in situ like the host_* stage
///    rows.
///  - `host_grant,1,0,0,s` (optional, >= 0): host time of one grant by a device actor, from the
///    `done` of the stage that ran to the start of the queued stage it grants (two actor
///    hand-offs), measured in situ on consecutive runs of one barrier's expert stages on one
///    device, or for barrier-free wirings on consecutive runs of one device whose second
///    stage had tokens queued when the first ended. `stage_overhead` is measured with the tiny
///    model's own barrier and grant times taken out, so that none of them is counted twice.
///  - `# spread_attention=σ spread_expert=σ spread_sampler=σ` (optional metadata, each in
///    [0, kMaxRunSpread]): the log standard deviation of a real run's span around the sim's
///    time for the same run (kernel rows plus host rows), per stage kind, measured in situ
///    like the host_* rows; the sim draws each stage run's duration around its mean with it
///    (engine/exec/run_spread.hpp; `[cost] spread_seed`).
///
/// Model (fitted at load; stated so that a reader can check it against the file):
///  - attention: t = T0(n) + k_decode · (S_decode − n_decode) + Σ_prefill seqs core(S − P),
///    where T0(n) interpolates the c = 1 rows (projections and router: no context), S is the
///    number of (query, key) pairs a sequence's new tokens attend to (causal), sequences with
///    one new token are decode, more are prefill; k_decode is the least-squares slope
///    through the origin of t − T0 over S − n on the `attention` rows with c > 1; core(x)
///    interpolates t − T0(P) of the `prefill` rows over their x = S − P (with core(0) = 0),
///    or is k_prefill · x (the same kind of slope) when there is one prefill row.
///  - expert, lm_head, host_* (stage runs and barriers): piecewise-linear interpolation in n of
///    the rows (at the same
///    width for experts; another width scales the full width's time by width ratio), linear
///    extrapolation beyond the last two points, the first point's time below it, clamped at
///    0 except for the in-run stage corrections (host_attention, host_expert, host_sampler),
///    which keep their sign but never go below their most negative row (a long prefill beyond
///    the rows must not extrapolate to a run of 0); no host_* rows of a kind: 0.
///  - contention (with `expert_alone` rows): t = t_alone + s · (t_expert − t_alone), s = the
///    share of the other measured threads whose devices are busy (busy devices of the node
///    beside this one / (concurrent − 1), at most 1). In a simulated run s is not taken once
///    at the run's start: the run progresses at rate t_alone / t(s) while s holds and its end
///    moves whenever a device of its node starts or ends a run (a flow model of the node's
///    memory bandwidth: engine/exec/device_activity.hpp, shared runs).
///
/// Value type; const methods may be called from any thread.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/sim/op_cost.hpp"

namespace muflow::kernels::sim {

/// Monotone lookup table: (x, seconds) points, x ascending and distinct.
class InterpolatedTimes {
 public:
  InterpolatedTimes() = default;
  /// `points` (x, seconds); sorted here; duplicate x keep their mean. Precondition: >= 1 point.
  /// `signed_values`: a table of corrections (the in-run stage rows), whose values between
  /// and beyond the points keep their sign, down to the most negative point's; otherwise they
  /// are clamped at 0.
  explicit InterpolatedTimes(std::vector<std::pair<double, double>> points,
                             bool signed_values = false);
  /// Seconds at `x` (see the file comment); 0 when the table is empty.
  double at(double x) const;
  size_t size() const { return points_.size(); }

 private:
  std::vector<std::pair<double, double>> points_;
  bool signed_ = false;
  double floor_ = 0.0;  ///< signed: min(0, the smallest point's value)
};

class MeasuredKernels {
 public:
  /// What a `host_*` row times: a stage run of a kind, a barrier (the dispatch or combine
  /// all-to-all between stages; its tokens are the rows it moves), or a device actor's grant
  /// (tokens 1: a grant moves no rows).
  enum class RunKind { kAttention, kExpert, kSampler, kDispatch, kCombine, kGrant };
  /// Every RunKind, in declaration order.
  static constexpr RunKind kRunKinds[] = {RunKind::kAttention, RunKind::kExpert,  RunKind::kSampler,
                                          RunKind::kDispatch,  RunKind::kCombine, RunKind::kGrant};

  /// Most data rows a file may hold (bounded before anything is stored).
  static constexpr int64_t kMaxRows = 100'000;
  /// Largest file read, bytes (comment and metadata lines included: bounded before reading).
  static constexpr int64_t kMaxFileBytes = int64_t{16} << 20;
  /// Largest time a row may give, seconds (one kernel call or host time: an hour is already
  /// absurd; bounded so that sums and fits over the rows stay finite).
  static constexpr double kMaxRowSeconds = 3600.0;

  /// Reads and fits `path`. Errors (messages start with "path:line:" where a line is at
  /// fault): NotFound when it cannot be opened; InvalidArgument for a missing `# kind=...`
  /// line, a header other than `op,tokens,context,width,seconds`, an unknown op, a size that
  /// is not a non-negative integer (tokens >= 1 where sized, context >= tokens for prefill),
  /// a time outside [0, kMaxRowSeconds] (host_attention, host_expert and host_sampler:
  /// [-kMaxRowSeconds, kMaxRowSeconds]), more than kMaxRows rows or kMaxFileBytes bytes, a
  /// malformed `concurrent` value, a `spread_*` value outside [0, kMaxRunSpread], or too few
  /// rows to fit: attention at c = 1 for 2 distinct n, expert at the
  /// file's `ffn` for 2 distinct n, lm_head for 2 distinct n.
  static absl::StatusOr<MeasuredKernels> read_csv(const std::string& path);

  /// A table built in memory (tests, and the stage-overhead measurement).
  MeasuredKernels(std::map<std::string, std::string> meta, InterpolatedTimes attention_t0,
                  double k_decode, double k_prefill, std::map<int64_t, InterpolatedTimes> expert,
                  InterpolatedTimes lm_head, double stage_overhead_s);
  MeasuredKernels() = default;

  /// The `# key=value` metadata (kind, model dims, dtype, threads, ...).
  const std::map<std::string, std::string>& meta() const { return meta_; }
  /// meta()["kind"]: the device kind that ran the kernels ("cpu").
  std::string kind() const;

  /// Seconds of the attention stage for `sequences` (see the file comment).
  double attention_seconds(std::span<const AttentionSequence> sequences) const;
  /// Seconds of one expert FFN of width `ffn` on `num_tokens` rows (0 for none), with
  /// `busy_share` ∈ [0, 1] of the other measured threads' devices busy beside it (1: as the
  /// `expert` rows were measured; 0: alone, the `expert_alone` rows). Without `expert_alone`
  /// rows the share is ignored.
  double expert_seconds(int64_t num_tokens, int64_t ffn, double busy_share = 1.0) const;
  /// meta()["concurrent"]: threads that measured at once (1 when absent; read_csv refuses
  /// a value outside [1, 1024]).
  int64_t concurrent() const { return concurrent_; }
  /// Whether the file has `expert_alone` rows.
  bool has_expert_alone() const { return !expert_alone_.empty(); }
  /// Seconds of the LM head and sampling on `num_rows` rows (0 for none).
  double lm_head_seconds(int64_t num_rows) const;
  /// Host seconds per stage run outside the runs (0 when not measured).
  double stage_overhead_s() const { return stage_overhead_s_; }
  /// Host seconds inside one stage run of `kind` on `num_tokens` tokens beyond its kernels, or
  /// of one barrier of `kind` moving `num_tokens` rows (0 for no token or no `host_*` rows of
  /// that kind). Negative where a stage kind's rows are (a correction: the caller keeps the
  /// run's time >= 0); never for barriers and grants.
  double host_seconds(RunKind kind, int64_t num_tokens) const;
  /// Largest `spread_*` value read_csv accepts (a log standard deviation: runs varying by a
  /// factor e is already absurd).
  static constexpr double kMaxRunSpread = 1.0;
  /// The `# spread_<kind>=σ` metadata of a stage kind (attention, expert, sampler): the log
  /// standard deviation of its runs around their modeled time; 0 when absent, and for
  /// barriers and grants.
  double run_spread(RunKind kind) const;
  /// Replaces the in-run host time tables (calibration builds the table first without them).
  void set_host_times(std::map<RunKind, InterpolatedTimes> tables) { host_ = std::move(tables); }
  double k_decode() const { return k_decode_; }
  double k_prefill() const { return k_prefill_; }

 private:
  std::map<std::string, std::string> meta_;
  InterpolatedTimes attention_t0_;
  double k_decode_ = 0;
  double k_prefill_ = 0;
  /// Prefill core time (t − T0(P)) vs (query, key) pairs of the `prefill` rows, with (0, 0);
  /// used instead of k_prefill when the file has 2 or more prefill rows.
  InterpolatedTimes prefill_core_;
  std::map<int64_t, InterpolatedTimes> expert_;  ///< by width
  std::map<int64_t, InterpolatedTimes> expert_alone_;  ///< by width (`expert_alone` rows)
  int64_t concurrent_ = 1;
  int64_t full_ffn_ = 0;                         ///< the widest measured width
  InterpolatedTimes lm_head_;
  double stage_overhead_s_ = 0;
  std::map<RunKind, InterpolatedTimes> host_;  ///< in-run host time by stage kind
  std::map<RunKind, double> spread_;           ///< `spread_*` metadata by stage kind
};

/// The metadata key of a stage kind's run spread ("spread_attention", "spread_expert",
/// "spread_sampler"); nullptr for barriers and grants.
const char* run_spread_key(MeasuredKernels::RunKind kind);

/// Whether host rows of `kind` keep their sign: the stage kinds (in-run corrections, which may
/// be negative); barriers and grants are gaps, >= 0.
bool host_time_signed(MeasuredKernels::RunKind kind);

/// The CSV op name of a kind's host time rows ("host_attention", ..., "host_grant").
const char* host_op_name(MeasuredKernels::RunKind kind);

}  // namespace muflow::kernels::sim
