#include "actors/backends/backend.hpp"

#include "absl/strings/str_format.h"
#include "actors/backends/cpu.hpp"
#include "actors/backends/sim.hpp"
#ifdef MUFLOW_HAVE_CUDA
#include "actors/backends/cuda.hpp"
#endif

namespace muflow::actors {

absl::StatusOr<std::unique_ptr<Backend>> make_backend(const engine::topology::Topology& topology) {
  if (topology.backend == "cpu") return make_cpu_backend(topology);
  if (topology.backend == "sim") return make_sim_backend(topology);
#ifdef MUFLOW_HAVE_CUDA
  if (topology.backend == "cuda") return make_cuda_backend(topology);
  constexpr const char* kBuilt = "cpu, cuda, sim";
#else
  constexpr const char* kBuilt =
      "cpu, sim (cuda needs a build with the CUDA toolkit: nvcc found "
      "by CMake, MUFLOW_WITH_CUDA=ON)";
#endif
  return absl::UnimplementedError(
      absl::StrFormat("%s: backend '%s' is not available in this build; expected: %s",
                      topology.source, topology.backend, kBuilt));
}

}  // namespace muflow::actors
