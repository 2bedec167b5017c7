#pragma once
/// \file
/// The cpu backend's executor: real math on a shared, prepacked CpuModel.

#include <memory>

#include "engine/exec/cpu_expert_shards.hpp"
#include "engine/exec/cpu_model.hpp"
#include "engine/exec/executor.hpp"

namespace muflow::engine::exec {

/// Runs stages with CpuModel (its GEMMs: kernels/cpu/linear.hpp). Durations are measured by
/// the caller, so every `seconds` output is 0. All devices of a process share one CpuModel
/// (read-only); see Executor for threading.
class CpuExecutor final : public Executor {
 public:
  /// `shards` (may be null) is needed only by the moeshard wiring's expert_shard calls.
  /// `gemm_threads` (≥ 1, `[cluster] threads_per_device`): each stage's GEMMs split their
  /// columns over that many OpenMP threads of the calling device thread
  /// (kernels/cpu/gemm_threads.hpp; the same bits for any count).
  explicit CpuExecutor(std::shared_ptr<const CpuModel> model,
                       std::shared_ptr<const CpuExpertShards> shards = nullptr,
                       int gemm_threads = 1)
      : model_(std::move(model)), shards_(std::move(shards)), gemm_threads_(gemm_threads) {}

  int64_t activation_width() const override { return model_->config().hidden_size; }
  bool virtual_time() const override { return false; }
  void embed(const std::vector<dataflow::TokenMeta>& tokens, float* h) override;
  absl::Status attention(int64_t block, serving::KvCache& kv,
                         const std::vector<dataflow::TokenMeta>& tokens, float* h,
                         const AttentionResult& out, double* seconds) override;
  void expert(int64_t block, int64_t expert, const float* x, int64_t n, float* y,
              double* seconds) override;
  void expert_shard(int64_t block, int64_t expert, int64_t shard, int64_t num_shards,
                    const float* x, int64_t n, float* y, double* seconds) override;
  void sample(const std::vector<dataflow::TokenMeta>& rows, const float* h,
              const std::vector<topology::SamplingSpec>& sampling, std::vector<int32_t>* tokens,
              std::vector<std::vector<float>>* logits, double* seconds) override;

 private:
  std::shared_ptr<const CpuModel> model_;
  std::shared_ptr<const CpuExpertShards> shards_;
  int gemm_threads_;
};

}  // namespace muflow::engine::exec
