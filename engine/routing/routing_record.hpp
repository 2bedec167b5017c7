#pragma once
/// \file
/// Per-token routing paths: recorded from any run (`muflow run --record-routing FILE`) and
/// replayed by the sim backend's "recorded" router, so a simulation sees exactly the expert
/// choices the real model made (invariant 1 across backends), and planners (ExFlow affinity)
/// can read real paths through the layers.
///
/// File format: CSV with header `request_id,position,block,experts,weights`; `experts` and
/// `weights` are space-separated top-k lists in top-k rank order; weights printed with 9
/// significant digits (exact float round trip). Rows sorted by (request_id, position, block).

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/routing/router_model.hpp"

namespace muflow::engine::routing {

/// One token's choice in one block.
struct RoutingChoice {
  std::vector<int32_t> experts;  ///< [num_topk], top-k rank order
  std::vector<float> weights;    ///< [num_topk]
};

/// (request_id, position, block) → choice.
using RoutingTable = std::map<std::tuple<int64_t, int64_t, int32_t>, RoutingChoice>;

/// Collects choices from the attention stages of a run. Thread-safe (one mutex); owned by the
/// run's context.
class RoutingRecorder {
 public:
  /// Adds the choice of one token (`num_topk` entries of each array).
  void add(int64_t request_id, int64_t position, int32_t block, const int32_t* experts,
           const float* weights, int64_t num_topk);
  /// Writes the CSV (creating parent folders). Errors: Internal naming the path.
  absl::Status write_csv(const std::string& path) const;
  RoutingTable table() const;

 private:
  mutable std::mutex mutex_;
  RoutingTable rows_;
};

/// Reads a routing CSV. Errors: NotFound for a missing file; InvalidArgument naming the file
/// and line for a malformed row, top-k lists of different lengths, or a duplicate key.
absl::StatusOr<RoutingTable> read_routing_csv(const std::string& path);

/// The sim router that replays a recorded table. Tokens the table does not hold (another
/// workload) fall back to uniform routing, seeded; `num_fallbacks()` counts them.
/// Errors (at load): the table's top-k differs from `num_topk`, or names an expert outside
/// [0, num_experts) or a block outside [0, num_layers).
absl::StatusOr<std::unique_ptr<RouterModel>> make_recorded_router(const std::string& path,
                                                                  int64_t num_experts,
                                                                  int64_t num_topk,
                                                                  int64_t num_layers,
                                                                  uint64_t seed);

}  // namespace muflow::engine::routing
