// Fuzzes `muflow bench --sweep KEY=value` overrides (engine/topology/topology_override.hpp):
// every line of the input is one KEY=value (split at the first '='), applied in order to the
// synthetic demo topology, as cmd_bench applies a sweep's values one after another.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/topology/topology.hpp"
#include "engine/topology/topology_override.hpp"

namespace topology = muflow::engine::topology;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  topology::Topology t = topology::synthetic_demo_topology();
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty()) {
    const size_t eol = rest.find('\n');
    const std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    (void)topology::apply_topology_override(t, std::string(line.substr(0, eq)),
                                            std::string(line.substr(eq + 1)));
  }
  return 0;
}
