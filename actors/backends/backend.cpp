#include "actors/backends/backend.hpp"

#include <algorithm>
#include <caf/all.hpp>
#include <thread>

#include "absl/strings/str_format.h"
#include "actors/backends/cpu.hpp"
#include "actors/backends/sim.hpp"
#ifdef MUFLOW_HAVE_CUDA
#include "actors/backends/cuda.hpp"
#endif

namespace muflow::actors {

void configure_real_time_clock(caf::actor_system_config& cfg, int64_t num_devices) {
  const auto threads = std::max<size_t>(
      1, std::min<size_t>(std::thread::hardware_concurrency(), static_cast<size_t>(num_devices)));
  cfg.set("scheduler.max-threads", threads);
  // Work sharing (one central queue; an idle worker sleeps on a condition variable and is
  // woken by each enqueue), not CAF's default work stealing: there a message that makes an
  // actor ready is queued on the sending worker's own queue (policy/work_stealing.hpp,
  // internal_enqueue, CAF 0.17.6), so while that worker runs a device's stage for
  // milliseconds, the collectives and stages it made ready wait unless the other worker
  // steals them while polling (50 µs sleeps, then 10 ms). Measured on 2 cores
  // (bench/topologies/predict-synthetic-2cpu.toml, 2 devices, 4 alternating runs): mean ITL
  // 11.1 -> 9.3 ms, p50 8.8 -> 7.1 ms; decode-synthetic-4cpu 930 -> 1020 tok/s; one device
  // unchanged.
  cfg.set("scheduler.policy", caf::atom("sharing"));
}

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
