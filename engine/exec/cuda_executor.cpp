#include "engine/exec/cuda_executor.hpp"

#include <cstring>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "engine/exec/sample_rows.hpp"
#include "kernels/assert.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/rms_norm.hpp"
#include "kernels/cuda/rope.hpp"
#include "kernels/cuda/router.hpp"

namespace muflow::engine::exec {
namespace {

namespace kc = kernels::cuda;

// Scratch slots of the executor (CudaModel's functions use 12–15).
enum Slot : int {
  kIn = 0,   // h or x rows uploaded
  kOut = 1,  // expert output / normed rows
  kQkv = 2,
  kAttn = 3,
  kProj = 4,
  kX = 5,       // post-attention norm (expert input)
  kLogits = 6,  // router or LM-head logits
  kIds = 7,
  kWeights = 8,
  kShared = 9,
  kMeta = 10,  // int32 page plan
  kPositions = 11,
  kBf16Input = 12,
  kKvStage = 16,
};

[[noreturn]] void die(const absl::Status& s, const char* where) {
  std::fprintf(stderr, "muflow: cuda executor: %s: %s\n", where, std::string(s.message()).c_str());
  std::abort();
}

template <typename T>
T* slot(CudaScratch& scratch, int s, int64_t count, absl::Status* status) {
  absl::StatusOr<void*> p = scratch.get(s, static_cast<std::size_t>(count) * sizeof(T));
  if (!p.ok()) {
    if (status->ok()) *status = p.status();
    return nullptr;
  }
  return static_cast<T*>(*p);
}

absl::Status copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                  cudaStream_t stream) {
  if (bytes == 0) return absl::OkStatus();
  if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, stream); e != cudaSuccess) {
    return cuda_status(e, kind == cudaMemcpyHostToDevice ? "upload" : "download");
  }
  return absl::OkStatus();
}

absl::Status finish(cudaStream_t stream) {
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    return cuda_status(e, "running a stage's kernels");
  }
  return absl::OkStatus();
}

}  // namespace

CudaExecutor::CudaExecutor(std::shared_ptr<const CudaModel> model)
    : model_(std::move(model)), kv_(model_->config().num_kv_heads * model_->config().head_dim) {
  use_gpu();
  MUFLOW_CUDA_ASSERT(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

CudaExecutor::~CudaExecutor() {
  use_gpu();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void CudaExecutor::use_gpu() const { MUFLOW_CUDA_ASSERT(cudaSetDevice(model_->gpu())); }

void CudaExecutor::embed(const std::vector<dataflow::TokenMeta>& tokens, float* h) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) return;
  use_gpu();
  const int64_t H = model_->config().hidden_size;
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = tokens[i].token_id;
  absl::Status s;
  int32_t* d_ids = slot<int32_t>(scratch_, kPositions, n, &s);
  float* d_h = slot<float>(scratch_, kIn, n * H, &s);
  if (s.ok()) s = copy(d_ids, ids.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice, stream_);
  if (s.ok()) {
    model_->embed(d_ids, n, d_h, stream_);
    s = copy(h, d_h, n * H * sizeof(float), cudaMemcpyDeviceToHost, stream_);
  }
  if (s.ok()) s = finish(stream_);
  if (!s.ok()) die(s, "embed");
}

absl::Status CudaExecutor::attention(int64_t block, serving::KvCache& kv,
                                     const std::vector<dataflow::TokenMeta>& tokens, float* h,
                                     const AttentionResult& out, double* seconds) {
  *seconds = 0.0;
  if (tokens.empty()) return absl::OkStatus();
  use_gpu();
  return attention_impl(block, kv, tokens, h, out);
}

absl::Status CudaExecutor::attention_impl(int64_t block, serving::KvCache& kv,
                                          const std::vector<dataflow::TokenMeta>& tokens, float* h,
                                          const AttentionResult& out) {
  const model::ModelConfig& c = model_->config();
  const CudaModel::Block& blk = model_->block(block);
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t H = c.hidden_size, hd = c.head_dim, qd = c.num_heads * hd,
                kvd = c.num_kv_heads * hd, W = qd + 2 * kvd, K = c.num_topk, E = c.num_experts;
  // Positions first, before anything reaches the device or the host cache (as cpu: a batch
  // that fails appends nothing after the failing row; here nothing at all).
  {
    absl::flat_hash_map<int64_t, int64_t> next;
    for (int64_t i = 0; i < n; ++i) {
      auto it = next.find(tokens[i].request_id);
      if (it == next.end())
        it = next.emplace(tokens[i].request_id, kv.length(tokens[i].request_id)).first;
      if (tokens[i].position != it->second) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "block %d: request %d position %d does not continue its KV cache (length %d)", block,
            tokens[i].request_id, tokens[i].position, it->second));
      }
      ++it->second;
    }
  }
  absl::StatusOr<CudaKvCache::Plan> plan = kv_.prepare(kv, tokens, scratch_, kKvStage, stream_);
  if (!plan.ok()) return plan.status();
  absl::Status s;
  float* d_h = slot<float>(scratch_, kIn, n * H, &s);
  float* d_normed = slot<float>(scratch_, kOut, n * H, &s);
  float* d_qkv = slot<float>(scratch_, kQkv, n * W, &s);
  float* d_attn = slot<float>(scratch_, kAttn, n * qd, &s);
  float* d_proj = slot<float>(scratch_, kProj, n * H, &s);
  float* d_x = slot<float>(scratch_, kX, n * H, &s);
  float* d_logits = slot<float>(scratch_, kLogits, n * E, &s);
  int32_t* d_ids = slot<int32_t>(scratch_, kIds, n * K, &s);
  float* d_w = slot<float>(scratch_, kWeights, n * K, &s);
  const bool shared = c.shared_expert_ffn > 0 && out.shared != nullptr;
  float* d_shared = shared ? slot<float>(scratch_, kShared, n * H, &s) : nullptr;
  const int64_t meta_count = 4 * n + static_cast<int64_t>(plan->table.size());
  int32_t* d_meta = slot<int32_t>(scratch_, kMeta, meta_count, &s);
  int64_t* d_pos = slot<int64_t>(scratch_, kPositions, n, &s);
  if (!s.ok()) return s;
  std::vector<int32_t> meta;
  meta.reserve(meta_count);
  for (const std::vector<int32_t>* part :
       {&plan->page, &plan->slot, &plan->table_start, &plan->context_len, &plan->table}) {
    meta.insert(meta.end(), part->begin(), part->end());
  }
  std::vector<int64_t> positions(n);
  for (int64_t i = 0; i < n; ++i) positions[i] = tokens[i].position;
  if (s = copy(d_h, h, n * H * sizeof(float), cudaMemcpyHostToDevice, stream_); !s.ok()) return s;
  if (s = copy(d_meta, meta.data(), meta.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream_);
      !s.ok()) {
    return s;
  }
  if (s = copy(d_pos, positions.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice, stream_);
      !s.ok()) {
    return s;
  }
  const int32_t* d_page = d_meta;
  const int32_t* d_slot = d_meta + n;
  const int32_t* d_table_start = d_meta + 2 * n;
  const int32_t* d_context = d_meta + 3 * n;
  const int32_t* d_table = d_meta + 4 * n;

  kc::rms_norm(d_h, blk.input_norm.as<float>(), n, H, c.rms_norm_eps, d_normed, stream_);
  if (s = model_->linear(blk.qkv, blk.qkv_bias.as<float>(), d_normed, n, d_qkv, scratch_,
                         kBf16Input, stream_);
      !s.ok()) {
    return s;
  }
  kc::rope_qk(d_qkv, W, d_pos, n, c.num_heads, c.num_kv_heads, hd, c.rope_theta, stream_);
  kc::kv_write(kv_.pool(), kvd, d_qkv, W, qd, d_page, d_slot, n, stream_);
  kc::paged_attention(d_qkv, W, kv_.pool(), d_table, d_table_start, d_context, n, c.num_heads,
                      c.num_kv_heads, hd, d_attn, stream_);
  if (s = model_->linear(blk.o, nullptr, d_attn, n, d_proj, scratch_, kBf16Input, stream_);
      !s.ok()) {
    return s;
  }
  kc::add_inplace(d_h, d_proj, n * H, stream_);
  kc::rms_norm(d_h, blk.post_attn_norm.as<float>(), n, H, c.rms_norm_eps, d_x, stream_);
  if (s = model_->linear(blk.router, nullptr, d_x, n, d_logits, scratch_, kBf16Input, stream_);
      !s.ok()) {
    return s;
  }
  kc::router_topk(d_logits, n, E, K, c.norm_topk_prob, d_ids, d_w, stream_);
  if (shared) {
    if (s = model_->ffn(blk.shared_gate_up, blk.shared_down, d_x, n, d_shared, scratch_, stream_);
        !s.ok()) {
      return s;
    }
    kc::shared_expert_gate(d_x, blk.shared_gate.as<float>(), n, H, d_shared, stream_);
  }
  std::vector<float> qkv(static_cast<std::size_t>(n * W));
  for (auto [dst, src, bytes] : std::vector<std::tuple<void*, const void*, std::size_t>>{
           {h, d_h, n * H * sizeof(float)},
           {out.x, d_x, n * H * sizeof(float)},
           {out.topk_ids, d_ids, n * K * sizeof(int32_t)},
           {out.topk_weights, d_w, n * K * sizeof(float)},
           {shared ? out.shared : nullptr, d_shared, shared ? n * H * sizeof(float) : 0},
           {qkv.data(), d_qkv, n * W * sizeof(float)}}) {
    if (dst == nullptr) continue;
    if (s = copy(dst, src, bytes, cudaMemcpyDeviceToHost, stream_); !s.ok()) return s;
  }
  if (s = finish(stream_); !s.ok()) return s;
  // The host cache, the authority (replication and release read it), gets the same rows.
  for (int64_t i = 0; i < n; ++i) {
    const float* row = qkv.data() + i * W;
    if (!kv.append(tokens[i].request_id, tokens[i].position, row + qd, row + qd + kvd)) {
      return absl::InternalError(
          absl::StrFormat("block %d: request %d position %d: host KV cache refused a checked row",
                          block, tokens[i].request_id, tokens[i].position));
    }
  }
  kv_.committed(kv, tokens);
  return absl::OkStatus();
}

absl::Status CudaExecutor::sync_kv(const serving::KvCache& kv,
                                   const std::vector<int64_t>& request_ids) {
  use_gpu();
  if (absl::Status s = kv_.sync(kv, request_ids, scratch_, kKvStage, stream_); !s.ok()) return s;
  return finish(stream_);
}

absl::Status CudaExecutor::expert_impl(int64_t block, int64_t expert, const float* x, int64_t n,
                                       float* y, int64_t range_begin, int64_t range_end) {
  const int64_t H = model_->config().hidden_size;
  absl::Status s;
  float* d_x = slot<float>(scratch_, kIn, n * H, &s);
  float* d_y = slot<float>(scratch_, kOut, n * H, &s);
  if (!s.ok()) return s;
  if (s = copy(d_x, x, n * H * sizeof(float), cudaMemcpyHostToDevice, stream_); !s.ok()) return s;
  if (s = model_->expert(block, expert, d_x, n, d_y, scratch_, stream_, range_begin, range_end);
      !s.ok()) {
    return s;
  }
  if (s = copy(y, d_y, n * H * sizeof(float), cudaMemcpyDeviceToHost, stream_); !s.ok()) return s;
  return finish(stream_);
}

void CudaExecutor::expert(int64_t block, int64_t expert, const float* x, int64_t n, float* y,
                          double* seconds) {
  *seconds = 0.0;
  if (n == 0) return;
  use_gpu();
  if (absl::Status s = expert_impl(block, expert, x, n, y, 0, -1); !s.ok()) die(s, "expert");
}

void CudaExecutor::expert_shard(int64_t block, int64_t expert, int64_t shard, int64_t num_shards,
                                const float* x, int64_t n, float* y, double* seconds) {
  *seconds = 0.0;
  if (static_cast<int64_t>(shard_plan_.ranges.size()) != num_shards) {
    absl::StatusOr<planning::ShardPlan> p =
        planning::moeshard_plan(model_->config().expert_ffn, num_shards);
    if (!p.ok()) die(p.status(), "expert_shard");
    shard_plan_ = *p;
  }
  if (n == 0) return;
  use_gpu();
  MUFLOW_ASSERT(shard >= 0 && shard < num_shards, "CudaExecutor::expert_shard: shard out of range");
  const planning::ShardRange r = shard_plan_.ranges[static_cast<size_t>(shard)];
  if (absl::Status s = expert_impl(block, expert, x, n, y, r.begin, r.end); !s.ok()) {
    die(s, "expert_shard");
  }
}

void CudaExecutor::sample(const std::vector<dataflow::TokenMeta>& rows, const float* h,
                          const std::vector<topology::SamplingSpec>& sampling,
                          std::vector<int32_t>* tokens, std::vector<std::vector<float>>* logits,
                          double* seconds) {
  *seconds = 0.0;
  const model::ModelConfig& c = model_->config();
  MUFLOW_ASSERT(sampling.size() == rows.size(), "CudaExecutor::sample: one SamplingSpec per row");
  const auto n = static_cast<int64_t>(rows.size());
  std::vector<float> all(static_cast<std::size_t>(n * c.vocab_size));
  if (n > 0) {
    use_gpu();
    absl::Status s;
    float* d_h = slot<float>(scratch_, kIn, n * c.hidden_size, &s);
    float* d_logits = slot<float>(scratch_, kLogits, n * c.vocab_size, &s);
    if (s.ok())
      s = copy(d_h, h, n * c.hidden_size * sizeof(float), cudaMemcpyHostToDevice, stream_);
    if (s.ok()) s = model_->logits(d_h, n, d_logits, scratch_, stream_);
    if (s.ok()) {
      s = copy(all.data(), d_logits, all.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_);
    }
    if (s.ok()) s = finish(stream_);
    if (!s.ok()) die(s, "sample");
  }
  sample_rows(rows, all.data(), c.vocab_size, sampling, tokens, logits);
}

}  // namespace muflow::engine::exec
