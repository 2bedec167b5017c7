// Fuzzes the routing CSV that `muflow run --record-routing` writes and the `recorded` sim
// router replays (engine/routing/routing_record.hpp): read_routing_csv, then the recorded
// router's checks (8 experts, top-2, 4 blocks) on the same file.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/routing/routing_record.hpp"
#include "tests/fuzz/fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = muflow::fuzz::write_input("routing.csv", data, size);
  if (!muflow::engine::routing::read_routing_csv(path).ok()) return 0;
  (void)muflow::engine::routing::make_recorded_router(path, 8, 2, 4, 7);
  return 0;
}
