#include "actors/backends/cuda.hpp"

#include <algorithm>
#include <caf/all.hpp>
#include <thread>

#include "absl/strings/str_format.h"
#include "actors/backends/model_source.hpp"
#include "actors/wirings/wiring.hpp"
#include "engine/exec/cuda_executor.hpp"
#include "engine/planning/moeshard_plan.hpp"
#include "kernels/cuda/device_info.hpp"

namespace muflow::actors {
namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend(std::vector<std::shared_ptr<const engine::exec::CudaModel>> models,
              int64_t num_devices, kernels::sim::Precision precision)
      : models_(std::move(models)), num_devices_(num_devices) {
    config_ = models_.front()->config();
    precision_ = precision;
  }
  std::string_view name() const override { return "cuda"; }
  std::string rate_kind() const override { return kernels::cuda::sim_device_kind(0); }
  bool virtual_time() const override { return false; }
  void configure_clock(caf::actor_system_config& cfg) const override {
    configure_real_time_clock(cfg, num_devices_);  // a device's thread mostly waits for its stream
  }
  std::vector<std::shared_ptr<engine::exec::Executor>> make_executors(
      const PreparedWiring&) const override {
    std::vector<std::shared_ptr<engine::exec::Executor>> out;
    for (int64_t d = 0; d < num_devices_; ++d) {
      out.push_back(std::make_shared<engine::exec::CudaExecutor>(
          models_[static_cast<size_t>(d) % models_.size()]));
    }
    return out;
  }
  absl::StatusOr<std::shared_ptr<transport::Channel>> make_channel(
      const transport::Channel*) const override {
    return std::make_shared<transport::InProcessChannel>();
  }
  // The host KvCache is the authority (engine/exec/cuda_kv_cache.hpp); its device mirror grows
  // on demand and reports running out as a stage error.
  int64_t kv_capacity_bytes(int64_t, int64_t) const override { return -1; }

 private:
  std::vector<std::shared_ptr<const engine::exec::CudaModel>> models_;  // [GPUs used]
  int64_t num_devices_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> make_cuda_backend(
    const engine::topology::Topology& topology) {
  std::string why;
  const int gpus = kernels::cuda::device_count(&why);
  if (gpus == 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: backend 'cuda': no CUDA device found (%s)", topology.source, why));
  }
  const auto num_devices = static_cast<int64_t>(topology.devices.size());
  const int used = static_cast<int>(std::min<int64_t>(gpus, num_devices));  // GPUs devices map to
  for (int g = 0; g < used; ++g) {
    if (const std::string why_not = kernels::cuda::unsupported_reason(g); !why_not.empty()) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%s: backend 'cuda': GPU %d: %s", topology.source, g, why_not));
    }
  }
  absl::StatusOr<std::shared_ptr<const engine::model::ModelWeights>> weights =
      load_model_weights(topology, /*prepared_copies=*/1.0);
  if (!weights.ok()) return weights.status();
  const engine::model::ModelConfig& c = (*weights)->config;
  if (absl::Status s = c.validate(); !s.ok()) return s;
  if (absl::Status s = engine::topology::check_topology_against_model(topology, c); !s.ok()) {
    return s;
  }
  // A MoEShard shard reads columns [begin, end) of each bf16 down projection: the tensor-core
  // GEMM needs that start and width in 16-byte chunks (gate and up rows are aligned anyway).
  bool bf16_down = false;
  for (const engine::model::BlockWeights& b : (*weights)->blocks) {
    for (const engine::model::ExpertWeights& e : b.experts) {
      bf16_down = bf16_down || e.down.dtype == engine::model::DType::kBF16;
    }
  }
  if (topology.wiring == "moeshard" && bf16_down) {
    absl::StatusOr<engine::planning::ShardPlan> plan =
        engine::planning::moeshard_plan(c.expert_ffn, num_devices);
    if (!plan.ok()) return plan.status();
    for (const engine::planning::ShardRange& r : plan->ranges) {
      if (r.begin % 8 != 0 || r.size() % 8 != 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: backend 'cuda', wiring 'moeshard': bf16 shards must start and end at multiples "
            "of 8 intermediate units (the tensor-core GEMM reads 16-byte chunks); "
            "intermediate_size %d over %d devices gives [%d, %d)",
            topology.source, c.expert_ffn, num_devices, r.begin, r.end));
      }
    }
  }
  std::vector<std::shared_ptr<const engine::exec::CudaModel>> models;
  for (int g = 0; g < used; ++g) {
    absl::StatusOr<std::shared_ptr<const engine::exec::CudaModel>> m =
        engine::exec::CudaModel::prepare(**weights, g);
    if (!m.ok()) {
      return absl::Status(m.status().code(), absl::StrFormat("%s: GPU %d: %s", topology.source, g,
                                                             m.status().message()));
    }
    models.push_back(*m);
  }
  return std::make_unique<CudaBackend>(std::move(models), num_devices,
                                       topology.model.dtype == "bf16"
                                           ? kernels::sim::Precision::kBF16
                                           : kernels::sim::Precision::kF32);
}

}  // namespace muflow::actors
