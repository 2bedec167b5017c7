#pragma once
/// \file
/// A wiring as data (ARCHITECTURE.md §2): which stage actors exist on which device, the edges
/// between them (barrier collective or point to point), the rule each receptor's μ-queue uses
/// to merge what arrives, and the few behaviours a wiring plugs into the generic actors
/// (a collective's delivery, an expert stage's kernel, where a token continues). The generic
/// actors (stage, device, collective, coordinator) read only this; no wiring name appears
/// here. The wirings that fill it live in actors/wirings/.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/locked_kv_cache.hpp"
#include "actors/messages.hpp"
#include "actors/send.hpp"
#include "engine/dataflow/token_batch.hpp"
#include "engine/exec/executor.hpp"
#include "transport/sparse_traffic.hpp"

namespace muflow::actors {

struct RunContext;
using RunContextPtr = std::shared_ptr<const RunContext>;

/// How an edge carries token batches between stages.
enum class EdgeKind {
  /// Through a barrier collective of the block: every source contributes once per iteration
  /// (possibly nothing) and the collective delivers to every destination when all arrived.
  kBarrier,
  /// Straight to the destination stage's μ-queue (on sim across the big-switch network).
  kPointToPoint,
};

/// How an input μ-queue (block 0 attention, expert stages) hands batches to a run.
enum class InputRule {
  /// One batch per coordinator iteration, in iteration order; an empty batch passes through
  /// at once (the barrier downstream needs every source's part).
  kIteration,
  /// Whatever queued, first in first out, whole batches up to `max_batch_tokens` tokens.
  kFifo,
};

/// When a merge point (attention of block b+1, the sampler) releases tokens: after their
/// residual and all top-k expert outputs arrived, grouped as follows
/// (engine/dataflow/token_pool.hpp).
enum class MergeRule {
  kIteration,  ///< a whole iteration at a time, once every residual source delivered it
  kRequest,    ///< a request's tokens as soon as they are complete
  kWave,       ///< a request's tokens once the whole attention run (wave) they left in is
};

/// How the coordinator paces requests and picks an attention DP rank for a new one.
enum class Pacing {
  /// One iteration at a time over every rank (every rank gets a batch, possibly empty);
  /// admission to the rank with the fewest active requests.
  kIteration,
  /// Each request's next step as soon as its previous one returned; admission to the rank
  /// with the most free KV-cache memory (AsyncMoE §3.1).
  kPerRequest,
};

/// Which all-to-all of a block a collective implements.
enum class CollectiveKind { kDispatch, kCombine };

/// Rows one source sent one destination through a barrier.
struct RowFlow {
  int32_t source = 0;
  int32_t dest = 0;
  int64_t rows = 0;  ///< > 0
};

/// The flows of a dense count matrix `rows_from[dest][source]`, zeros left out, sorted by
/// (source, dest).
std::vector<RowFlow> row_flows(const std::vector<std::vector<int64_t>>& rows_from);

/// The per-destination batches of one completed barrier and how many rows each source sent
/// each destination (the network model charges them).
struct Delivery {
  /// [num destinations]; null: no rows for that destination (the collective sends it an empty
  /// batch if it takes part in the iteration)
  std::vector<engine::dataflow::TokenBatchPtr> out;
  /// Every (source, destination) pair that moved rows, sorted by (source, dest): sparse, so a
  /// barrier of 1,024 ranks and 256 experts costs its flows, not 262,144 counts.
  std::vector<RowFlow> flows;
  int64_t tokens_rebalanced = 0;  ///< tokens moved off their expert's home device
};

/// What a barrier collective does with one iteration's contributions. Called from the
/// collective actor only; implementations are immutable (shared by the blocks of a run).
class CollectiveRule {
 public:
  virtual ~CollectiveRule() = default;
  /// The batches for `num_dests` destinations from `parts` (one contribution per source, in
  /// source order, split form unless takes_whole_rows(); under sparse iterations a rank that
  /// took no part is a shared empty contribution with source and iteration -1: use the index
  /// and `iteration`). `width`: activation
  /// floats per row (0 in simulation). Errors: malformed contributions (the run fails with the
  /// message).
  virtual absl::StatusOr<Delivery> deliver(const RunContext& ctx, CollectiveKind kind,
                                           int32_t block, const std::vector<ContributionPtr>& parts,
                                           size_t num_dests, int64_t iteration,
                                           int64_t width) const = 0;
  /// True when `deliver` takes whole contributions (Contribution::is_whole) as well as split
  /// ones; a stage sends this rule whole contributions then. Default: false (split only).
  virtual bool takes_whole_rows() const { return false; }
  /// sim: bytes this wiring moves with the all-to-all besides the rows (added to `traffic`,
  /// from device to device). Default: none.
  virtual void add_side_traffic(const RunContext& ctx, CollectiveKind kind, int32_t block,
                                const std::vector<RowFlow>& flows,
                                transport::TrafficBuilder& traffic) const {}
};

/// The default collective: concatenates the parts addressed to each destination in source
/// order (deterministic); takes whole contributions too, split into the same order. Defined
/// in actors/collective.cpp.
std::shared_ptr<const CollectiveRule> concat_rule();

/// Where each token of an attention run continues after the block's experts (the DP rank
/// whose merge point takes its residual and its expert outputs).
class ContinuationRule {
 public:
  virtual ~ContinuationRule() = default;
  /// [meta.size()] ranks for the tokens `meta` that ran attention (block, rank), with their
  /// top-k expert ids `ids` ([meta.size(), num_topk]).
  virtual std::vector<int32_t> next_ranks(const RunContext& ctx, int32_t block, int32_t rank,
                                          const std::vector<engine::dataflow::TokenMeta>& meta,
                                          const std::vector<int32_t>& ids) const = 0;
};

/// What an expert stage computes on one batch. Owned by one stage actor; called only from it.
class ExpertKernel {
 public:
  virtual ~ExpertKernel() = default;
  /// Writes the outputs `y` ([in.num_tokens(), width], row i for in.tokens[i]) and returns the
  /// modeled seconds (sim) or 0 (measured). May append messages to send (metrics for the
  /// coordinator, or a failure).
  virtual double compute(const engine::dataflow::TokenBatch& in, float* y,
                         std::vector<Send>& out) = 0;
  /// Display name, e.g. "expert b3 e5".
  virtual std::string name() const = 0;
};

/// The kernel of a stage that runs one expert on every row it gets
/// (engine::exec::Executor::expert).
std::unique_ptr<ExpertKernel> single_expert_kernel(engine::exec::Executor* exec, int32_t block,
                                                   int32_t expert);

/// One run's wiring graph. Written by the wiring before any actor is spawned, read-only after.
struct WiringGraph {
  Pacing pacing = Pacing::kIteration;
  /// attention(b, r) → expert stages of block b. Point to point needs one stage per expert
  /// (slot e runs expert e).
  EdgeKind dispatch = EdgeKind::kBarrier;
  /// expert stages of block b → merge point of each token's continuation rank.
  EdgeKind combine = EdgeKind::kBarrier;
  InputRule input = InputRule::kIteration;  ///< block 0 attention and expert stages
  MergeRule merge = MergeRule::kIteration;  ///< attention of blocks > 0 and samplers
  int64_t max_batch_tokens = 512;  ///< InputRule::kFifo and merge points: most tokens a run takes
  /// The device scheduler may hold small fragments (`[scheduler] hold_min_tokens`).
  bool batch_hold = false;
  /// [num_layers][num expert slots] device of expert stage slot s of block b.
  std::vector<std::vector<int64_t>> slot_device;
  /// Point-to-point dispatch only: [num_layers][num_experts] further slots that run expert e
  /// of block b besides slot e (replicas; empty: none). The sender splits the rows of such an
  /// expert into 1 + replicas contiguous chunks in its row order (slot e first), so which
  /// stage computes a row is deterministic. Empty vector: no replicas anywhere.
  std::vector<std::vector<std::vector<int32_t>>> replica_slots;
  /// [num_ranks] ranks whose merge point each attention rank sends a residual batch every run
  /// (possibly empty): its own rank, or more when tokens may continue elsewhere.
  std::vector<std::vector<int32_t>> residual_targets;
  /// Barrier edges: the rules of the dispatch and combine collectives.
  std::shared_ptr<const CollectiveRule> dispatch_rule, combine_rule;
  /// Null: every token continues on the rank it came from.
  std::shared_ptr<const ContinuationRule> continuation;
  /// Every attention rank keeps a replica of every request's KV cache of its block: an
  /// attention stage sends the K/V rows it appended to the same block's stages on every other
  /// rank (ExFlow's all-gather), which append them when the message arrives (before any later
  /// batch they run: the rows were sent before the run's outputs); a finished request is
  /// released on every rank.
  bool kv_replicated = false;

  /// Expert stage slots per block (every block has the same number).
  int64_t num_slots() const { return slot_device.empty() ? 0 : slot_device.front().size(); }
  /// [num_ranks] residual batches each rank's merge point waits for per iteration (in-degree
  /// of its residual edges). O(edges): call once per run, not once per stage.
  std::vector<int64_t> residual_sources() const;
  /// True when a DP rank's tokens never leave it between blocks and a rank with no tokens
  /// takes no part in an iteration except as an empty source: iteration pacing, barrier
  /// dispatch and combine, no continuation rule, no KV replicas, and each rank's residual goes
  /// to its own merge point only (sync, harmoeny, moeshard). Such a run can launch only the
  /// ranks with tokens (RunContext::sparse_iterations).
  bool ranks_independent() const;
};

/// One run's wiring: its graph and what it plugs into the generic stages. Built by a wiring
/// (actors/wirings/wiring.hpp) for each run; immutable afterwards.
class WiringRun {
 public:
  virtual ~WiringRun() = default;
  /// The run's graph (immutable once the run started).
  const WiringGraph& graph() const { return graph_; }
  /// The KV cache attention stage (block, rank) uses (default: its own). `kv_width`: K floats
  /// per token row (0 in simulation).
  virtual std::shared_ptr<LockedKvCache> kv_cache(int32_t block, int32_t rank,
                                                  int64_t kv_width) const;
  /// The kernel of expert stage (block, slot) on `exec` (default: single_expert_kernel).
  virtual std::unique_ptr<ExpertKernel> expert_kernel(const RunContextPtr& ctx,
                                                      engine::exec::Executor* exec, int32_t block,
                                                      int32_t slot) const;

 protected:
  WiringGraph graph_;
};

}  // namespace muflow::actors
