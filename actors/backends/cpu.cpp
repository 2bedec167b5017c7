#include "actors/backends/cpu.hpp"

#include <algorithm>
#include <caf/all.hpp>
#include <thread>

#include "absl/strings/str_format.h"
#include "actors/backends/model_source.hpp"
#include "actors/wirings/wiring.hpp"
#include "engine/exec/cpu_executor.hpp"

namespace muflow::actors {
namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(std::shared_ptr<const engine::model::ModelWeights> weights,
             std::shared_ptr<const engine::exec::CpuModel> model, int64_t num_devices,
             int64_t gemm_threads, kernels::sim::Precision precision)
      : weights_(std::move(weights)),
        model_(std::move(model)),
        num_devices_(num_devices),
        gemm_threads_(gemm_threads) {
    config_ = model_->config();
    precision_ = precision;  // the rates planners read for a cpu device (e.g. HarMoEny's q)
  }
  std::string_view name() const override { return "cpu"; }
  bool virtual_time() const override { return false; }
  void configure_clock(caf::actor_system_config& cfg) const override {
    configure_real_time_clock(cfg, num_devices_);
  }
  std::shared_ptr<const engine::model::ModelWeights> weights() const override { return weights_; }
  void release_weights() override { weights_.reset(); }
  std::shared_ptr<const engine::exec::CpuModel> cpu_model() const override { return model_; }
  int64_t gemm_threads_per_device() const override { return gemm_threads_; }
  std::string rate_kind() const override { return "cpu"; }

  std::vector<std::shared_ptr<engine::exec::Executor>> make_executors(
      const PreparedWiring& wiring) const override {
    std::vector<std::shared_ptr<engine::exec::Executor>> out;
    for (int64_t d = 0; d < num_devices_; ++d) {
      out.push_back(std::make_shared<engine::exec::CpuExecutor>(
          model_, wiring.cpu_shards(), static_cast<int>(gemm_threads_)));
    }
    return out;
  }
  absl::StatusOr<std::shared_ptr<transport::Channel>> make_channel(
      const transport::Channel*) const override {
    return std::make_shared<transport::InProcessChannel>();
  }
  int64_t kv_capacity_bytes(int64_t, int64_t) const override { return -1; }

 private:
  std::shared_ptr<const engine::model::ModelWeights> weights_;
  std::shared_ptr<const engine::exec::CpuModel> model_;
  int64_t num_devices_;
  int64_t gemm_threads_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> make_cpu_backend(
    const engine::topology::Topology& topology) {
  absl::StatusOr<std::shared_ptr<const engine::model::ModelWeights>> loaded =
      load_model_weights(topology, /*prepared_copies=*/2.0);
  if (!loaded.ok()) return loaded.status();
  std::shared_ptr<const engine::model::ModelWeights> weights = *loaded;
  absl::StatusOr<std::shared_ptr<const engine::exec::CpuModel>> model =
      engine::exec::CpuModel::prepare(
          weights,
          kernels::cpu::parse_bf16_compute(topology.model.compute)
              .value_or(kernels::cpu::Bf16Compute::kAuto),
          topology.model.gemm == "onednn-tiles" ? kernels::cpu::LinearKernel::kOneDnnTiles
          : topology.model.gemm == "fixed-order" ? kernels::cpu::LinearKernel::kFixedOrder
                                                 : kernels::cpu::LinearKernel::kAuto);
  if (!model.ok()) return model.status();
  if (absl::Status s = engine::topology::check_topology_against_model(topology, (*model)->config());
      !s.ok()) {
    return s;
  }
  const int64_t gemm_threads = engine::topology::resolve_threads_per_device(
      topology, static_cast<int64_t>(std::thread::hardware_concurrency()));
  return std::make_unique<CpuBackend>(
      std::move(weights), *model, static_cast<int64_t>(topology.devices.size()), gemm_threads,
      topology.model.dtype == "bf16" ? kernels::sim::Precision::kBF16
                                     : kernels::sim::Precision::kF32);
}

}  // namespace muflow::actors
