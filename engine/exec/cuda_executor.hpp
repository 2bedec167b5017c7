#pragma once
/// \file
/// The cuda backend's executor (issue #20): one virtual device on one GPU, its stages' math
/// on that GPU with the model's weights uploaded once (CudaModel), its own CUDA stream,
/// activation scratch and paged KV cache.

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "engine/exec/cuda_kv_cache.hpp"
#include "engine/exec/cuda_model.hpp"
#include "engine/exec/executor.hpp"
#include "engine/planning/moeshard_plan.hpp"

namespace muflow::engine::exec {

/// Runs stages on one GPU. Stage inputs and outputs are host rows (the Executor contract, as
/// on cpu): each call uploads its inputs, runs its kernels on the executor's stream and
/// downloads its outputs before it returns, so durations are measured by the caller and
/// every `seconds` output is 0. Several executors (virtual devices) may share one GPU and
/// one CudaModel; each has its own stream, so their stages overlap on the GPU. Calls come one
/// at a time per executor (see Executor), from whichever CAF thread runs the device.
///
/// Errors: attention returns FailedPrecondition for a position that does not continue its
/// request's cache (as cpu) and ResourceExhausted / Internal for CUDA failures. embed, expert,
/// expert_shard and sample have no error path in the Executor interface: a CUDA failure
/// there (out of memory for activations) aborts with the CUDA error named.
class CudaExecutor final : public Executor {
 public:
  /// Creates the stream on model->gpu(). Aborts if the stream cannot be created.
  explicit CudaExecutor(std::shared_ptr<const CudaModel> model);
  ~CudaExecutor() override;
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;

  int64_t activation_width() const override { return model_->config().hidden_size; }
  bool virtual_time() const override { return false; }
  void embed(const std::vector<dataflow::TokenMeta>& tokens, float* h) override;
  absl::Status attention(int64_t block, serving::KvCache& kv,
                         const std::vector<dataflow::TokenMeta>& tokens, float* h,
                         const AttentionResult& out, double* seconds) override;
  void expert(int64_t block, int64_t expert, const float* x, int64_t n, float* y,
              double* seconds) override;
  /// MoEShard: intermediate units [begin, end) of moeshard_plan(ffn, num_shards)'s range
  /// `shard`, computed from the whole expert's uploaded weights (no second copy).
  void expert_shard(int64_t block, int64_t expert, int64_t shard, int64_t num_shards,
                    const float* x, int64_t n, float* y, double* seconds) override;
  void sample(const std::vector<dataflow::TokenMeta>& rows, const float* h,
              const std::vector<topology::SamplingSpec>& sampling, std::vector<int32_t>* tokens,
              std::vector<std::vector<float>>* logits, double* seconds) override;

  absl::Status sync_kv(const serving::KvCache& kv,
                       const std::vector<int64_t>& request_ids) override;

  /// Pages of the device KV cache in use (tests).
  int64_t kv_pages_in_use() const { return kv_.pages_in_use(); }

 private:
  absl::Status attention_impl(int64_t block, serving::KvCache& kv,
                              const std::vector<dataflow::TokenMeta>& tokens, float* h,
                              const AttentionResult& out);
  absl::Status expert_impl(int64_t block, int64_t expert, const float* x, int64_t n, float* y,
                           int64_t range_begin, int64_t range_end);
  void use_gpu() const;

  std::shared_ptr<const CudaModel> model_;
  cudaStream_t stream_ = nullptr;
  CudaScratch scratch_;
  CudaKvCache kv_;
  planning::ShardPlan shard_plan_;  // MoEShard: cached for the last num_shards
};

}  // namespace muflow::engine::exec
