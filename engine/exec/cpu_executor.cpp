#include "engine/exec/cpu_executor.hpp"

#include "engine/exec/sample_rows.hpp"
#include "kernels/assert.hpp"
#include "kernels/cpu/gemm_threads.hpp"

namespace muflow::engine::exec {

void CpuExecutor::embed(const std::vector<dataflow::TokenMeta>& tokens, float* h) {
  std::vector<int32_t> ids(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) ids[i] = tokens[i].token_id;
  model_->embed(ids.data(), static_cast<int64_t>(ids.size()), h);
}

absl::Status CpuExecutor::attention(int64_t block, serving::KvCache& kv,
                                    const std::vector<dataflow::TokenMeta>& tokens, float* h,
                                    const AttentionResult& out, double* seconds) {
  *seconds = 0.0;
  const kernels::cpu::GemmThreadsScope threads(gemm_threads_);
  const auto n = static_cast<int64_t>(tokens.size());
  std::vector<int64_t> rids(n), pos(n);
  for (int64_t i = 0; i < n; ++i) {
    rids[i] = tokens[i].request_id;
    pos[i] = tokens[i].position;
  }
  return model_->attention(block, kv, rids.data(), pos.data(), n, h,
                           AttentionOutputs{out.x, out.topk_ids, out.topk_weights, out.shared});
}

void CpuExecutor::expert(int64_t block, int64_t expert, const float* x, int64_t n, float* y,
                         double* seconds) {
  *seconds = 0.0;
  const kernels::cpu::GemmThreadsScope threads(gemm_threads_);
  model_->expert(block, expert, x, n, y);
}

void CpuExecutor::expert_shard(int64_t block, int64_t expert, int64_t shard, int64_t num_shards,
                               const float* x, int64_t n, float* y, double* seconds) {
  *seconds = 0.0;
  const kernels::cpu::GemmThreadsScope threads(gemm_threads_);
  MUFLOW_ASSERT(shards_ && shards_->num_shards() == num_shards,
                "CpuExecutor::expert_shard: shards not prepared for this count");
  shards_->forward(block, expert, shard, x, n, y);
}

void CpuExecutor::sample(const std::vector<dataflow::TokenMeta>& rows, const float* h,
                         const std::vector<topology::SamplingSpec>& sampling, std::vector<int32_t>* tokens,
                         std::vector<std::vector<float>>* logits, double* seconds) {
  *seconds = 0.0;
  const kernels::cpu::GemmThreadsScope threads(gemm_threads_);
  const model::ModelConfig& c = model_->config();
  MUFLOW_ASSERT(sampling.size() == rows.size(), "CpuExecutor::sample: one SamplingSpec per row");
  const auto n = static_cast<int64_t>(rows.size());
  std::vector<float> all(n * c.vocab_size);
  if (n > 0) model_->logits(h, n, all.data());
  sample_rows(rows, all.data(), c.vocab_size, sampling, tokens, logits);
}

}  // namespace muflow::engine::exec
