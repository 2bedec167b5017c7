#include "engine/routing/router_model.hpp"
#include "engine/routing/routing_record.hpp"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/routing/router_categorical.hpp"
#include "engine/routing/router_replay.hpp"

namespace muflow::engine::routing {

std::vector<std::string> router_kind_names() {
  return {"uniform",     "harmoeny-skew", "moeshard-multinomial",
          "exponential", "replay-npy",    "replay-per-rank", "recorded"};
}

absl::StatusOr<std::unique_ptr<RouterModel>> make_router_model(const RouterSpec& spec,
                                                               int64_t num_experts,
                                                               int64_t num_topk,
                                                               int64_t num_layers) {
  const std::vector<std::string> kinds = router_kind_names();
  if (std::find(kinds.begin(), kinds.end(), spec.kind) == kinds.end()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "unknown router kind '%s'; expected one of %s", spec.kind, absl::StrJoin(kinds, ", ")));
  }
  if (num_experts < 1 || num_layers < 1 || num_topk < 1 || num_topk > num_experts) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "router %s: needs num_experts >= 1, num_layers >= 1 and 1 <= num_topk <= num_experts; "
        "got num_experts=%d, num_topk=%d, num_layers=%d",
        spec.kind, num_experts, num_topk, num_layers));
  }
  if (num_experts > INT32_MAX || num_layers > INT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrFormat("router %s: num_experts and num_layers must fit in int32", spec.kind));
  }
  if (spec.kind == "replay-npy") {
    absl::StatusOr<std::unique_ptr<ReplayNpyRouter>> r = ReplayNpyRouter::load(
        router_trace_path(spec, num_experts), num_experts, num_topk, num_layers, spec.seed,
        spec.replay_tokens_per_request, spec.replay_shuffle);
    if (!r.ok()) return r.status();
    return std::unique_ptr<RouterModel>(*std::move(r));
  }
  if (spec.kind == "recorded") {
    if (spec.trace_file.empty()) {
      return absl::InvalidArgumentError(
          "router recorded: needs the routing CSV of a run (`muflow run --record-routing`)");
    }
    return make_recorded_router(spec.trace_file, num_experts, num_topk, num_layers, spec.seed);
  }
  if (spec.kind == "replay-per-rank") {
    const std::string path = router_trace_path(spec, num_experts);
    absl::StatusOr<PerRankRoutingCounts> counts = load_per_rank_routing_csv(path, num_experts);
    if (!counts.ok()) return counts.status();
    return make_per_rank_router(*counts, path, num_topk, num_layers, spec.seed, spec.trace_layers);
  }
  return make_categorical_router(spec, num_experts, num_topk, num_layers);
}

}  // namespace muflow::engine::routing
