#pragma once
/// \file
/// Device scheduling policies: which ready stage a device actor grants next (pure functions).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/token_batch.hpp"

namespace muflow::engine {

/// What a device knows about one of its stages when it picks the next grant.
struct StageStatus {
  LayerId layer;
  int64_t queued_tokens = 0;  ///< tokens ready to run now (0 = not ready)
  uint64_t ready_seq = 0;     ///< order in which the stage became ready (smaller = earlier)
};

/// Picks the stage a device runs next. Implementations are pure and stateless.
class SchedulingPolicy {
 public:
  virtual ~SchedulingPolicy() = default;
  /// Index into `stages` of the stage to grant, or -1 when none has queued tokens.
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

/// Names accepted by make_scheduling_policy.
std::vector<std::string> scheduling_policy_names();

/// Builds a policy by name. Errors: InvalidArgument listing the known names.
absl::StatusOr<std::unique_ptr<SchedulingPolicy>> make_scheduling_policy(const std::string& name);

}  // namespace muflow::engine
