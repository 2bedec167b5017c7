#pragma once
/// \file
/// Device scheduling policies: which ready stage a device actor grants next (pure functions).

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/dataflow/token_batch.hpp"

namespace muflow::engine::serving {

/// What a device knows about one of its stages when it picks the next grant.
struct StageStatus {
  dataflow::LayerId layer;
  int64_t queued_tokens = 0;  ///< tokens ready to run now (0 = not ready)
  uint64_t ready_seq = 0;     ///< order in which the stage became ready (smaller = earlier)
  double ready_since_s = 0;   ///< run clock when it last became ready (seconds)
  bool held = false;          ///< batch hold: queued but not runnable yet (apply_batch_hold)
};

/// Whether a policy may grant the stage: it has queued tokens and is not held.
inline bool runnable(const StageStatus& s) { return s.queued_tokens > 0 && !s.held; }

/// Batch hold (barrier-free wirings; AsyncMoE's public code holds a layer until enough tokens
/// or an urgency deadline): marks `held` every stage with 0 < queued < `min_tokens` that
/// became ready less than `max_hold_s` before `now_s`, so small fragments wait for the rest
/// of their wave instead of costing a full weight read each. `min_tokens` <= 0 holds nothing.
/// Returns the earliest time a held stage is released (+inf when none is held). Pure.
double apply_batch_hold(std::vector<StageStatus>& stages, double now_s, int64_t min_tokens,
                        double max_hold_s);

/// Picks the stage a device runs next. Implementations are pure and stateless.
class SchedulingPolicy {
 public:
  virtual ~SchedulingPolicy() = default;
  /// Index into `stages` of the stage to grant, or -1 when none is runnable().
  virtual int64_t pick(const std::vector<StageStatus>& stages) const = 0;
  virtual const char* name() const = 0;
};

/// First come, first served: the stage that became ready earliest (ties → lower index).
class FifoPolicy final : public SchedulingPolicy {
 public:
  int64_t pick(const std::vector<StageStatus>& stages) const override;
  const char* name() const override { return "fifo"; }
};

/// Most tokens first (AsyncMoE §3.4's MTFS baseline): the stage with the most queued tokens,
/// ties → earliest ready, then lower index.
class MostTokensPolicy final : public SchedulingPolicy {
 public:
  int64_t pick(const std::vector<StageStatus>& stages) const override;
  const char* name() const override { return "most-tokens"; }
};

/// First layer first (AsyncMoE §3.4's FLFS baseline): the ready stage with the lowest block,
/// ties → earliest ready, then lower index. Aggressively merges a wave of tokens but lets new
/// requests preempt later blocks (the paper's Figure 12).
class FirstLayerFirstPolicy final : public SchedulingPolicy {
 public:
  int64_t pick(const std::vector<StageStatus>& stages) const override;
  const char* name() const override { return "flfs"; }
};

/// The defragging scheduler (AsyncMoE Algorithm 1, §3.4). Over the device's own stages,
/// with Q[b][g] the tokens queued at the stage of block b and index g:
///   score(b, g) = Q[b][g] + Σ_{k=1..K} δ^k · mean_g' Q[(b + k) mod N_B][g']   if Q[b][g] > 0,
/// where N_B = 1 + the largest block among the device's stages (the sampler counts as block
/// num_layers) and the mean is over the device's stages of that block (0 when it has none).
/// Picks the highest score; ties → earliest ready, then lower index. K and δ are
/// `[scheduler] defrag_lookahead` / `defrag_decay`. The paper gives no values; its public code
/// (USC-NSL/DisagMoE, csrc/engine/scheduler.cpp, AdvancedLayerScheduler::schedule) scores the
/// layer itself at weight 1 plus the next 3 layers at δ^1..δ^3 on main (83f2888: K = 3) and
/// the next 7 on refine_plots and the other April 2025 branches (94fd782:
/// `lookahead_steps = 8`, K = 7), δ = 0.8 on all. Defaults K = 3, δ = 0.8 (main). The public
/// code sums the layer's tokens; here a block's lookahead term is the mean over the device's
/// stages of that block (one per expert on an expert device).
class DefragPolicy final : public SchedulingPolicy {
 public:
  explicit DefragPolicy(int64_t lookahead = 3, double decay = 0.8)
      : lookahead_(lookahead), decay_(decay) {}
  int64_t pick(const std::vector<StageStatus>& stages) const override;
  const char* name() const override { return "defrag"; }
  /// The score of every stage (0 for stages with no queued tokens), for tests and traces.
  std::vector<double> scores(const std::vector<StageStatus>& stages) const;

 private:
  int64_t lookahead_;
  double decay_;
};

/// Names accepted by make_scheduling_policy and by the topology key `[scheduler] policy`
/// (engine/topology/topology.cpp reads the key against this list).
inline constexpr std::array<std::string_view, 4> kSchedulingPolicyNames = {"fifo", "most-tokens",
                                                                           "flfs", "defrag"};

/// kSchedulingPolicyNames as strings.
std::vector<std::string> scheduling_policy_names();

/// Builds a policy by name; `defrag_lookahead` (>= 0) and `defrag_decay` (in [0, 1]) are
/// DefragPolicy's K and δ (ignored by the others). Errors: InvalidArgument listing the known
/// names, or naming a K or δ out of range.
absl::StatusOr<std::unique_ptr<SchedulingPolicy>> make_scheduling_policy(
    const std::string& name, int64_t defrag_lookahead = 3, double defrag_decay = 0.8);

}  // namespace muflow::engine::serving
