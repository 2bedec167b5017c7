#include "engine/scheduling_policy.hpp"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace muflow::engine {

int64_t FifoPolicy::pick(const std::vector<StageStatus>& stages) const {
  int64_t best = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(stages.size()); ++i) {
    if (stages[i].queued_tokens <= 0) continue;
    if (best < 0 || stages[i].ready_seq < stages[best].ready_seq) best = i;
  }
  return best;
}

int64_t MostTokensPolicy::pick(const std::vector<StageStatus>& stages) const {
  int64_t best = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(stages.size()); ++i) {
    const StageStatus& s = stages[i];
    if (s.queued_tokens <= 0) continue;
    if (best < 0 || s.queued_tokens > stages[best].queued_tokens ||
        (s.queued_tokens == stages[best].queued_tokens &&
         s.ready_seq < stages[best].ready_seq)) {
      best = i;
    }
  }
  return best;
}

std::vector<std::string> scheduling_policy_names() { return {"fifo", "most-tokens"}; }

absl::StatusOr<std::unique_ptr<SchedulingPolicy>> make_scheduling_policy(const std::string& name) {
  if (name == "fifo") return std::make_unique<FifoPolicy>();
  if (name == "most-tokens") return std::make_unique<MostTokensPolicy>();
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown scheduling policy '%s'; expected one of: %s", name,
      absl::StrJoin(scheduling_policy_names(), ", ")));
}

}  // namespace muflow::engine
