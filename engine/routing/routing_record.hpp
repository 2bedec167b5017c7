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
/// run's context. An add appends to flat arrays (no allocation per token once they have grown):
/// it runs inside every attention run, and a map node and two vectors per token cost the
/// recorded runs 4–6 % of their TTFT on the 2-core VM (bench/README.md, stop 50). Where a key
/// is added again (a request's token recomputed after a recovery), the last choice counts.
class RoutingRecorder {
 public:
  /// Adds the choice of one token (`num_topk` >= 0 entries of each array).
  void add(int64_t request_id, int64_t position, int32_t block, const int32_t* experts,
           const float* weights, int64_t num_topk);
  /// Writes the CSV (creating parent folders), rows sorted by key. Errors: Internal naming
  /// the path.
  absl::Status write_csv(const std::string& path) const;
  /// Every key's last choice.
  RoutingTable table() const;

 private:
  struct Row {
    int64_t request_id;
    int64_t position;
    int32_t block;
    int32_t num_topk;
    size_t offset;  ///< into experts_ / weights_
  };
  /// Indices into rows_ of every key's last row, in key order. Caller holds mutex_.
  std::vector<size_t> last_rows() const;

  mutable std::mutex mutex_;
  std::vector<Row> rows_;
  std::vector<int32_t> experts_;
  std::vector<float> weights_;
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
