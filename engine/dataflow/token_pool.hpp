#pragma once
/// \file
/// The receptor's token pool (AsyncMoE §3.2): holds each token of one attention DP rank until
/// its residual row and all of its top-k expert outputs for a block have arrived, then merges
/// them in top-k rank order (never arrival order), so the sum is bitwise the same whatever
/// wiring delivered the parts.
///
/// Two readiness rules, one per family of wirings:
///  - per iteration (barrier wirings such as `sync`): an iteration is ready once its residual
///    batch and `expected_expert_messages` expert-output batches arrived; it is taken whole.
///  - per request (the barrier-free `async` wiring): the tokens of one request that a stage
///    sent together (its prefill chunk or its decode token, the request's *group*) are ready
///    once their residual and every token's k outputs arrived, whatever batches carried them;
///    ready groups are taken first-ready-first, re-batched up to a token limit.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "engine/dataflow/token_batch.hpp"

namespace muflow::engine::dataflow {

/// Merged tokens: `tokens[i]` ↔ row i of `h` [n, hidden].
struct MergedTokens {
  int64_t iteration = 0;          ///< per-iteration pools: the iteration; per-request pools: -1
  std::vector<TokenMeta> tokens;  ///< meta of the residual; sorted by (request_id, position)
                                  ///< within an iteration or a group
  std::vector<float> h;           ///< residual + Σ_j w_j y_j (+ shared), [n, hidden]
};

/// Token pool of one merge point (attention stage of block b+1, or the sampler), for one DP
/// rank. Inputs: residual batches (rows `[h_mid | shared]`, width hidden or 2·hidden) and
/// expert-output batches (width hidden; rows carry topk_rank and topk_weight). Owned by one
/// stage actor; not thread-safe.
class TokenPool {
 public:
  enum class Readiness { kPerIteration, kPerRequest };

  /// A per-iteration pool: each iteration gets `expected_residual_messages` residual batches
  /// (1: its own rank's; `exflow`: one from every DP rank, since tokens continue where their
  /// top-1 expert ran) and `expected_expert_messages` expert-output batches (a barrier's
  /// delivery). Both counts >= 1.
  TokenPool(int64_t hidden, int64_t num_topk, int64_t expected_expert_messages,
            int64_t expected_residual_messages = 1);
  /// A per-request pool (batch.iteration is ignored; a request has one group in flight).
  /// With `by_wave`, a group is every token one attention run emitted (TokenMeta::wave)
  /// instead of one request's tokens: the run's wave merges as a whole, so fragments that
  /// return from different expert devices are not re-batched separately.
  static TokenPool per_request(int64_t hidden, int64_t num_topk, bool by_wave = false);

  Readiness readiness() const { return readiness_; }

  /// Adds a residual batch. Errors: InvalidArgument on a row width that is neither hidden nor
  /// 2·hidden, a token that was already added (in this batch or, per iteration, an earlier
  /// residual batch of the iteration), or (per iteration) more residual batches for the
  /// iteration than expected / (per request) a second residual for a request whose group is
  /// held.
  /// A rejected batch leaves the pool unchanged.
  absl::Status add_residual(const TokenBatch& batch);
  /// Adds expert outputs (width hidden). Errors: InvalidArgument on a bad width, a top-k rank
  /// out of range, or the same (token, rank) twice. A rejected batch leaves the pool unchanged.
  absl::Status add_expert_outputs(const TokenBatch& batch);

  /// Per iteration: the earliest iteration whose residual and all expected expert messages
  /// have arrived, or -1 when none has. Per request: always -1.
  int64_t complete_iteration() const;
  /// Number of tokens of an iteration held (0 if unknown; per-iteration pools).
  int64_t num_tokens(int64_t iteration) const;

  /// Removes and merges one complete iteration (per-iteration pools). Errors:
  /// FailedPrecondition if the iteration is incomplete, or a token lacks one of its top-k
  /// outputs (a dropped token).
  absl::StatusOr<MergedTokens> take(int64_t iteration);

  /// Tokens that take_ready would return with no limit: the complete iteration's (per
  /// iteration) or those of every ready group (per request).
  int64_t ready_tokens() const;
  /// Takes what is ready: per iteration, the earliest complete iteration (whole, `max_tokens`
  /// ignored: the barrier already fixed the batch); per request, ready groups in the order
  /// they became ready while the total stays <= `max_tokens` (at least one group; a group is
  /// never split, since attention needs a request's positions in order). Empty result when
  /// nothing is ready. Errors: as take().
  absl::StatusOr<MergedTokens> take_ready(int64_t max_tokens);

  /// Per request: requests with tokens held (complete or not), for tests and leak checks.
  int64_t num_held_requests() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  /// The fields add_expert_outputs tests and counts per row (arrived, num_outputs,
  /// has_residual, weights) come first, in the entry's first 64-byte line (the entry is
  /// aligned to it): the rows of a combine come in expert order, so a bucket's entries are
  /// visited at random, and without activations (the sim) a row costs that one line, not the
  /// three an unaligned 184-byte entry spread them over (#19 item 6); with activations a row
  /// also writes its output row through `outputs`.
  struct alignas(64) Entry {
    uint64_t arrived = 0;  ///< bit j: top-k rank j arrived (num_topk <= 64)
    int32_t num_outputs = 0;
    bool has_residual = false;
    /// [num_topk]; inline up to top-8, so a routed token costs no allocation for them.
    absl::InlinedVector<float, 8> weights;
    TokenMeta meta;
    std::vector<float> residual;  ///< [hidden]
    std::vector<float> shared;    ///< [hidden] or empty
    std::vector<float> outputs;   ///< [num_topk * hidden], slot j valid when bit j of arrived
  };
  /// Tokens of one iteration (per iteration) or one request's group (per request).
  struct Bucket {
    bool residual_arrived = false;  ///< per iteration: all expected residual batches arrived
    int64_t residual_messages = 0;  ///< per iteration: residual batches so far
    int64_t expert_messages = 0;
    int64_t complete_entries = 0;  ///< entries with residual and all k outputs
    bool in_ready_order = false;   ///< per request: listed in ready_order_
    /// Consecutive positions of one request in consecutive slots: entry `first_slot + i` is
    /// position `first_position + i` of `request_id`, for i < count.
    struct Run {
      int64_t request_id = 0;
      int64_t first_position = 0;
      uint32_t first_slot = 0;
      uint32_t count = 0;
    };
    /// Up to kMaxRuns: the slots as runs, which a lookup scans (a bucket of a prefill chunk or
    /// of a few decoding requests is a few runs, and a combine looks up every one of a token's
    /// k rows: no hash of the key, no probe; #19 item 6). Beyond that, `index`.
    static constexpr size_t kMaxRuns = 8;
    std::vector<Run> runs;  ///< every slot in order while !hashed (then unused)
    bool hashed = false;    ///< `index` holds every slot (more than kMaxRuns runs came)
    /// (request, position) → index of its entry in `slots`, while `hashed`. A hash map: a
    /// row costs one probe, and the merge order (request, position) is made once by sorting
    /// `keys` when the bucket is taken (#19 item 6: a B-tree kept that order at every insert
    /// and cost a tenth of a 1,024-device simulation; its order is never read before the
    /// merge).
    absl::flat_hash_map<std::pair<int64_t, int64_t>, uint32_t> index;
    std::vector<Entry> slots;                       ///< in order of arrival
    std::vector<std::pair<int64_t, int64_t>> keys;  ///< [slots] each slot's (request, position)
    int64_t size() const { return static_cast<int64_t>(slots.size()); }
    /// Empties the bucket as a new one, keeping its containers' capacity (a removed bucket
    /// reused by the next; every field above is reset here).
    void clear();
    /// The entry of (request, position), or null.
    Entry* find(int64_t request_id, int64_t position);
    /// The index of (request, position)'s entry, added (empty) when missing; `added` tells.
    uint32_t find_or_add(int64_t request_id, int64_t position, bool* added = nullptr);
    /// Removes the last slot (the newest entry). Its key is no longer found; a bucket that
    /// switched to `index` when that entry came stays switched (unhash() goes back).
    void pop_last();
    /// Back to runs (`runs` rebuilt from `keys`, `index` emptied) after the entries that made
    /// the bucket switch to the index were popped: at most kMaxRuns runs (aborts otherwise).
    void unhash();

   private:
    /// The slot of (request, position) among `runs`, or -1.
    int64_t find_in_runs(int64_t request_id, int64_t position) const;
    /// Adds `slot` (request, position) to `runs`: the last run grows when it continues it.
    void append_run(int64_t request_id, int64_t position, uint32_t slot);
  };
  TokenPool(Readiness readiness, int64_t hidden, int64_t num_topk, int64_t expected_expert_messages,
            int64_t expected_residual_messages);
  int64_t bucket_key(const TokenBatch& batch, const TokenMeta& m) const;
  Entry& entry(Bucket& b, int64_t request_id, int64_t position);
  bool is_complete(const Bucket& b) const;
  // Per request: records `key` as ready when its bucket just became complete.
  void note_if_ready(int64_t key);
  // Merges and removes one complete bucket, appending to `out`.
  absl::Status merge_into(std::map<int64_t, Bucket>::iterator found, MergedTokens& out);
  // The bucket of `key`, added when missing (a spare one of the thread's Scratch when it has
  // one); `added` tells.
  Bucket& bucket(int64_t key, bool* added = nullptr);
  // Removes a bucket, keeping its node and its containers' capacity in the thread's Scratch.
  void remove(std::map<int64_t, Bucket>::iterator found);

  Readiness readiness_;
  bool by_wave_ = false;
  int64_t hidden_, num_topk_, expected_expert_messages_, expected_residual_messages_;
  std::map<int64_t, Bucket> buckets_;  ///< iteration or request id → bucket
  std::deque<int64_t> ready_order_;    ///< per request: ready groups, first-ready first
  int64_t ready_tokens_ = 0;           ///< per request: tokens in ready_order_'s groups
  /// Removed buckets (emptied, their containers' capacity kept) and the scratch of
  /// add_residual / add_expert_outputs / merge_into: one per thread, shared by the pools whose
  /// stages run on it (token_pool.cpp). A per-iteration pool of a decode step holds a few
  /// tokens; allocating a map node, its hash index and its vectors per iteration, or keeping
  /// them per pool (cold in cache when one of thousands of stages runs), was most of the
  /// pool's cost in a 256-device simulation (#19 item 6).
  struct Scratch;
  static Scratch& scratch();
};

}  // namespace muflow::engine::dataflow
