// Fuzzes HarMoEny's per-rank routing counts CSV (engine/routing/router_replay.hpp):
// load_per_rank_routing_csv for 8 experts (the Switch-8 rows of the shipped file), then the
// replay-per-rank router built from what loaded (top-2, 4 blocks, 1 trace layer).
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/routing/router_replay.hpp"
#include "tests/fuzz/fuzz_input_file.hpp"

namespace routing = muflow::engine::routing;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = muflow::fuzz::write_input("per-rank.csv", data, size);
  absl::StatusOr<routing::PerRankRoutingCounts> counts =
      routing::load_per_rank_routing_csv(path, 8);
  if (!counts.ok()) return 0;
  (void)routing::make_per_rank_router(*counts, path, 2, 4, 7, 1);
  return 0;
}
