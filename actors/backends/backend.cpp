#include "actors/backends/backend.hpp"

#include "absl/strings/str_format.h"
#include "actors/backends/cpu.hpp"
#include "actors/backends/sim.hpp"

namespace muflow::actors {

absl::StatusOr<std::unique_ptr<Backend>> make_backend(const engine::topology::Topology& topology) {
  if (topology.backend == "cpu") return make_cpu_backend(topology);
  if (topology.backend == "sim") return make_sim_backend(topology);
  return absl::UnimplementedError(
      absl::StrFormat("%s: backend '%s' is not available in this build; expected: cpu, sim",
                      topology.source, topology.backend));
}

}  // namespace muflow::actors
