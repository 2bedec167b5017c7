// Fuzzes the topology TOML parser (engine/topology/topology.hpp) on in-memory text. Relative
// paths resolve against the source tree's topologies/, so seeds naming ../models/... parse as
// far as a real file does. Any outcome but a crash, hang or leak is fine.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/topology/topology.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)muflow::engine::topology::parse_topology_string(text, "fuzz.toml",
                                                        MUFLOW_SOURCE_DIR "/topologies");
  return 0;
}
