#include "engine/exec/cpu_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/model/weight_shapes.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/gemm_threads.hpp"
#include "kernels/cpu/rms_norm.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/router.hpp"

namespace muflow::engine::exec {
namespace {

/// Attention work (context rows × heads × head_dim multiply-adds, twice) per extra thread:
/// about 50 µs; below that a fork/join costs more than it saves.
constexpr int64_t kAttentionWorkPerThread = int64_t{1} << 20;

using kernels::cpu::ExpertFfn;
using kernels::cpu::Linear;

std::unique_ptr<Linear> make_linear(const model::WeightTensor& w, const float* bias,
                                    kernels::cpu::Bf16Compute compute,
                                    kernels::cpu::LinearKernel gemm) {
  kernels::cpu::LinearOptions o;
  o.bf16_compute = compute;
  o.kernel = gemm;
  if (w.dtype == model::DType::kBF16) {
    return std::make_unique<Linear>(w.bf16.data(), w.rows(), w.cols(), bias, o);
  }
  return std::make_unique<Linear>(w.f32.data(), w.rows(), w.cols(), bias, o);
}

std::unique_ptr<ExpertFfn> make_ffn(const model::ExpertWeights& e, int64_t hidden, int64_t ffn,
                                    kernels::cpu::Bf16Compute compute,
                                    kernels::cpu::LinearKernel gemm) {
  const bool bf16 = e.gate.dtype == model::DType::kBF16 && e.up.dtype == model::DType::kBF16 &&
                    e.down.dtype == model::DType::kBF16;
  if (bf16) {
    return std::make_unique<ExpertFfn>(e.gate.bf16.data(), e.up.bf16.data(), e.down.bf16.data(),
                                       hidden, ffn, compute, gemm);
  }
  std::vector<float> g = e.gate.to_f32(), u = e.up.to_f32(), d = e.down.to_f32();
  return std::make_unique<ExpertFfn>(g.data(), u.data(), d.data(), hidden, ffn, gemm);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const CpuModel>> CpuModel::prepare(
    std::shared_ptr<const model::ModelWeights> weights, kernels::cpu::Bf16Compute bf16_compute,
    kernels::cpu::LinearKernel gemm) {
  if (!weights) return absl::InvalidArgumentError("CpuModel::prepare: null weights");
  if (absl::Status s = model::check_weight_shapes(*weights); !s.ok()) return s;
  const model::ModelConfig& c = weights->config;
  const int64_t H = c.hidden_size;
  auto model = std::shared_ptr<CpuModel>(new CpuModel(c));
  model->blocks_.resize(c.num_layers);
  for (int64_t b = 0; b < c.num_layers; ++b) {
    const model::BlockWeights& bw = weights->blocks[b];
    Block& blk = model->blocks_[b];
    blk.input_norm = bw.input_norm.to_f32();
    blk.post_attn_norm = bw.post_attn_norm.to_f32();
    model::WeightTensor qkv = model::concat_rows({&bw.q, &bw.k, &bw.v});
    absl::StatusOr<std::vector<float>> qkv_bias = model::fused_qkv_bias(c, bw, b);
    if (!qkv_bias.ok()) return qkv_bias.status();
    blk.qkv = make_linear(qkv, qkv_bias->empty() ? nullptr : qkv_bias->data(), bf16_compute, gemm);
    blk.o = make_linear(bw.o, nullptr, bf16_compute, gemm);
    std::vector<float> router = bw.router.to_f32();  // routing always in f32
    kernels::cpu::LinearOptions router_options;
    router_options.kernel = gemm;
    blk.router = std::make_unique<Linear>(router.data(), c.num_experts, H, nullptr, router_options);
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const model::ExpertWeights& ew = bw.experts[e];
      if (ew.gate.dtype == model::DType::kBF16) model->weights_dtype_ = "bf16";
      blk.experts.push_back(make_ffn(ew, H, c.expert_ffn, bf16_compute, gemm));
      if (blk.experts.back()->compute_type() == kernels::cpu::LinearWeightType::kBF16) {
        model->compute_dtype_ = "bf16";
      }
      if (blk.experts.back()->kernel() == kernels::cpu::LinearKernel::kFixedOrder) {
        const std::optional<kernels::cpu::VectorIsa> isa = kernels::cpu::widest_vector_isa();
        model->gemm_kernel_ =
            blk.experts.back()->compute_type() == kernels::cpu::LinearWeightType::kBF16
                ? "fixed-order (avx512_bf16)"
            : isa == kernels::cpu::VectorIsa::kAvx512 ? "fixed-order (avx512)"
                                                      : "fixed-order (avx2)";
      }
    }
    if (c.shared_expert_ffn > 0) {
      const model::ExpertWeights& se = bw.shared_expert;
      blk.shared_expert = make_ffn(se, H, c.shared_expert_ffn, bf16_compute, gemm);
      blk.shared_gate = bw.shared_expert_gate.to_f32();
    }
  }
  model->lm_head_ = make_linear(weights->lm_head, nullptr, bf16_compute, gemm);
  model->embed_ = weights->embed.to_f32();
  model->final_norm_ = weights->final_norm.to_f32();
  return std::shared_ptr<const CpuModel>(model);
}

void CpuModel::embed(const int32_t* ids, int64_t n, float* h) const {
  const int64_t H = config().hidden_size;
  const std::vector<float>& table = embed_;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(h + i * H, table.data() + static_cast<int64_t>(ids[i]) * H, H * sizeof(float));
  }
}

absl::Status CpuModel::attention(int64_t block, serving::KvCache& kv, const int64_t* request_ids,
                                 const int64_t* positions, int64_t n, float* h,
                                 const AttentionOutputs& out) const {
  if (n == 0) return absl::OkStatus();
  const model::ModelConfig& c = config();
  const Block& blk = blocks_[block];
  const int64_t H = c.hidden_size, hd = c.head_dim;
  const int64_t qd = c.num_heads * hd, kvd = c.num_kv_heads * hd, W = qd + 2 * kvd;

  std::vector<float> normed(n * H), qkv(n * W), attn(n * qd), proj(n * H);
  kernels::cpu::rms_norm(h, blk.input_norm.data(), n, H, c.rms_norm_eps, normed.data());
  blk.qkv->forward(normed.data(), n, qkv.data());
  for (int64_t i = 0; i < n; ++i) {
    float* row = qkv.data() + i * W;
    kernels::cpu::rope_rotate_half(row, &positions[i], 1, c.num_heads, hd, c.rope_theta);
    kernels::cpu::rope_rotate_half(row + qd, &positions[i], 1, c.num_kv_heads, hd, c.rope_theta);
    if (!kv.append(request_ids[i], positions[i], row + qd, row + qd + kvd)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "block %d: request %d position %d does not continue its KV cache (length %d)", block,
          request_ids[i], positions[i], kv.length(request_ids[i])));
    }
  }
  // Each row's attention is computed by one thread in a fixed order, so splitting the rows
  // over the device's GEMM threads (kernels/cpu/gemm_threads.hpp) never changes a bit. The
  // cache is only read here (appends happened above). Rows are dealt round-robin: a prefill's
  // row i attends over i + 1 positions, so contiguous halves would give one thread 3/4 of the
  // work.
  std::vector<const float*> keys(static_cast<std::size_t>(n)), values(keys.size());
  int64_t context_rows = 0;
  for (int64_t i = 0; i < n; ++i) {
    keys[i] = kv.keys(request_ids[i]);
    values[i] = kv.values(request_ids[i]);
    context_rows += positions[i] + 1;
  }
  const int threads = static_cast<int>(std::min<int64_t>(
      {static_cast<int64_t>(kernels::cpu::gemm_threads()), n,
       std::max<int64_t>(1, context_rows * c.num_heads * hd / kAttentionWorkPerThread)}));
#pragma omp parallel for num_threads(threads) schedule(static, 1) if (threads > 1)
  for (int64_t i = 0; i < n; ++i) {
    kernels::cpu::gqa_attention(qkv.data() + i * W, keys[i], values[i], positions[i] + 1,
                                c.num_heads, c.num_kv_heads, hd, attn.data() + i * qd);
  }
  blk.o->forward(attn.data(), n, proj.data());
  for (int64_t j = 0; j < n * H; ++j) h[j] += proj[j];

  kernels::cpu::rms_norm(h, blk.post_attn_norm.data(), n, H, c.rms_norm_eps, out.x);
  std::vector<float> router_logits(n * c.num_experts);
  blk.router->forward(out.x, n, router_logits.data());
  kernels::cpu::router_topk(router_logits.data(), n, c.num_experts, c.num_topk, c.norm_topk_prob,
                            out.topk_ids, out.topk_weights);
  if (blk.shared_expert && out.shared) {
    blk.shared_expert->forward(out.x, n, out.shared);
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = out.x + i * H;
      float dot = 0.f;
      for (int64_t j = 0; j < H; ++j) dot += xr[j] * blk.shared_gate[j];
      const float gate = 1.f / (1.f + std::exp(-dot));
      float* sr = out.shared + i * H;
      for (int64_t j = 0; j < H; ++j) sr[j] *= gate;
    }
  }
  return absl::OkStatus();
}

void CpuModel::expert(int64_t block, int64_t expert, const float* x, int64_t n, float* y) const {
  blocks_[block].experts[expert]->forward(x, n, y);
}

void CpuModel::logits(const float* h, int64_t n, float* logits) const {
  const model::ModelConfig& c = config();
  std::vector<float> normed(n * c.hidden_size);
  kernels::cpu::rms_norm(h, final_norm_.data(), n, c.hidden_size, c.rms_norm_eps,
                         normed.data());
  lm_head_->forward(normed.data(), n, logits);
}

void CpuModel::combine_row(float* h, const float* const* expert_rows, const float* weights,
                           int64_t num_topk, const float* shared, int64_t hidden) {
  for (int64_t d = 0; d < hidden; ++d) {
    float acc = 0.f;
    for (int64_t j = 0; j < num_topk; ++j) acc += weights[j] * expert_rows[j][d];
    if (shared) acc += shared[d];
    h[d] += acc;
  }
}

}  // namespace muflow::engine::exec
