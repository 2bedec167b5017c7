// Fuzzes the .npy reader (engine/model/npy_reader.hpp) and, on arrays it accepts, the
// replay-npy router's checks (ReplayNpyRouter::load, 8 experts, top-1, 4 blocks) and a few
// routes, as the sim backend uses a Switch routing trace.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/model/npy_reader.hpp"
#include "engine/routing/router_replay.hpp"
#include "tests/fuzz/fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = muflow::fuzz::write_input("trace.npy", data, size);
  if (!muflow::engine::model::read_npy_i64(path).ok()) return 0;
  auto router = muflow::engine::routing::ReplayNpyRouter::load(path, 8, 1, 4, 7, 3, true);
  if (!router.ok()) return 0;
  int32_t expert = 0;
  float weight = 0.0f;
  for (int32_t block = 0; block < 4; ++block) {
    for (int64_t position = 0; position < 4; ++position) {
      (*router)->route(block, /*request_id=*/5, position, &expert, &weight);
    }
  }
  return 0;
}
