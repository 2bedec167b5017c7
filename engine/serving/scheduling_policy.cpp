#include "engine/serving/scheduling_policy.hpp"

#include <algorithm>
#include <limits>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace muflow::engine::serving {

int64_t FifoPolicy::pick(const std::vector<StageStatus>& stages) const {
  int64_t best = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(stages.size()); ++i) {
    if (!runnable(stages[i])) continue;
    if (best < 0 || stages[i].ready_seq < stages[best].ready_seq) best = i;
  }
  return best;
}

int64_t MostTokensPolicy::pick(const std::vector<StageStatus>& stages) const {
  int64_t best = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(stages.size()); ++i) {
    const StageStatus& s = stages[i];
    if (!runnable(s)) continue;
    if (best < 0 || s.queued_tokens > stages[best].queued_tokens ||
        (s.queued_tokens == stages[best].queued_tokens &&
         s.ready_seq < stages[best].ready_seq)) {
      best = i;
    }
  }
  return best;
}

int64_t FirstLayerFirstPolicy::pick(const std::vector<StageStatus>& stages) const {
  int64_t best = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(stages.size()); ++i) {
    const StageStatus& s = stages[i];
    if (!runnable(s)) continue;
    if (best < 0 || s.layer.block < stages[best].layer.block ||
        (s.layer.block == stages[best].layer.block && s.ready_seq < stages[best].ready_seq)) {
      best = i;
    }
  }
  return best;
}

std::vector<double> DefragPolicy::scores(const std::vector<StageStatus>& stages) const {
  int32_t num_blocks = 0;
  for (const StageStatus& s : stages) num_blocks = std::max(num_blocks, s.layer.block + 1);
  std::vector<double> total(num_blocks, 0.0), count(num_blocks, 0.0);
  for (const StageStatus& s : stages) {
    total[s.layer.block] += static_cast<double>(std::max<int64_t>(s.queued_tokens, 0));
    count[s.layer.block] += 1.0;
  }
  std::vector<double> lookahead(num_blocks, 0.0);
  for (int32_t b = 0; b < num_blocks; ++b) {
    double weight = 1.0;
    for (int64_t k = 1; k <= lookahead_; ++k) {
      weight *= decay_;
      const int32_t next = static_cast<int32_t>((b + k) % num_blocks);
      if (count[next] > 0) lookahead[b] += weight * total[next] / count[next];
    }
  }
  std::vector<double> out(stages.size(), 0.0);
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].queued_tokens > 0) {
      out[i] = static_cast<double>(stages[i].queued_tokens) + lookahead[stages[i].layer.block];
    }
  }
  return out;
}

int64_t DefragPolicy::pick(const std::vector<StageStatus>& stages) const {
  const std::vector<double> score = scores(stages);
  int64_t best = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(stages.size()); ++i) {
    if (!runnable(stages[i])) continue;
    if (best < 0 || score[i] > score[best] ||
        (score[i] == score[best] && stages[i].ready_seq < stages[best].ready_seq)) {
      best = i;
    }
  }
  return best;
}

double apply_batch_hold(std::vector<StageStatus>& stages, double now_s, int64_t min_tokens,
                        double max_hold_s) {
  double next = std::numeric_limits<double>::infinity();
  for (StageStatus& s : stages) {
    const double release = s.ready_since_s + max_hold_s;
    s.held = min_tokens > 0 && s.queued_tokens > 0 && s.queued_tokens < min_tokens &&
             now_s < release;
    if (s.held) next = std::min(next, release);
  }
  return next;
}

std::vector<std::string> scheduling_policy_names() {
  return {kSchedulingPolicyNames.begin(), kSchedulingPolicyNames.end()};
}

absl::StatusOr<std::unique_ptr<SchedulingPolicy>> make_scheduling_policy(
    const std::string& name, int64_t defrag_lookahead, double defrag_decay) {
  if (name == "fifo") return std::make_unique<FifoPolicy>();
  if (name == "most-tokens") return std::make_unique<MostTokensPolicy>();
  if (name == "flfs") return std::make_unique<FirstLayerFirstPolicy>();
  if (name == "defrag") {
    if (defrag_lookahead < 0 || !(defrag_decay >= 0 && defrag_decay <= 1)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "defrag scheduler: lookahead %d must be >= 0 and decay %g in [0, 1]", defrag_lookahead,
          defrag_decay));
    }
    return std::make_unique<DefragPolicy>(defrag_lookahead, defrag_decay);
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown scheduling policy '%s'; expected one of: %s", name,
      absl::StrJoin(scheduling_policy_names(), ", ")));
}

}  // namespace muflow::engine::serving
