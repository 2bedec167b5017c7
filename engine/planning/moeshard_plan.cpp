#include "engine/planning/moeshard_plan.hpp"

#include "absl/strings/str_format.h"

namespace muflow::engine::planning {

absl::StatusOr<ShardPlan> moeshard_plan(int64_t ffn, int64_t num_devices) {
  if (ffn < 1 || num_devices < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "moeshard_plan: needs ffn >= 1 and num_devices >= 1; got ffn=%d, num_devices=%d", ffn,
        num_devices));
  }
  ShardPlan plan;
  plan.ffn = ffn;
  const int64_t base = ffn / num_devices, remainder = ffn % num_devices;
  int64_t begin = 0;
  for (int64_t d = 0; d < num_devices; ++d) {
    const int64_t size = base + (d < remainder ? 1 : 0);
    plan.ranges.push_back({begin, begin + size});
    begin += size;
  }
  return plan;
}

}  // namespace muflow::engine::planning
