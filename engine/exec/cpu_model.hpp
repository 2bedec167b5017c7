#pragma once
/// \file
/// The math of each stage of an MoE decoder on the CPU: a model with every GEMM prepacked
/// (oneDNN) and the per-stage functions that stage actors and the single-device reference
/// path both call. Every function is batch invariant (see kernels/README.md), which is what
/// makes every wiring produce the same tokens (ARCHITECTURE.md §8, invariant 1).

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/serving/kv_cache.hpp"
#include "engine/model/model_weights.hpp"
#include "kernels/cpu/expert_ffn.hpp"
#include "kernels/cpu/linear.hpp"

namespace muflow::engine::exec {

/// Outputs of the attention half of one block for `n` token rows.
struct AttentionOutputs {
  float* x = nullptr;              ///< [n, hidden] post-attention RMSNorm output (expert input)
  int32_t* topk_ids = nullptr;     ///< [n, num_topk] chosen experts, descending weight
  float* topk_weights = nullptr;   ///< [n, num_topk] router weights
  float* shared = nullptr;         ///< [n, hidden] gated shared-expert output, or nullptr when
                                   ///< the model has no shared expert
};

/// A model prepared for CPU execution. Immutable after `prepare`; all const methods may be
/// called concurrently from any thread (the KV cache argument is the caller's, not shared).
class CpuModel {
 public:
  /// Prepacks the weights of every GEMM (attention q|k|v fused, o, router in f32, every
  /// expert's gate|up fused and down, shared expert, LM head). bf16 matrices are computed as
  /// `bf16_compute` says (kernels/cpu/bf16_compute.hpp; kAuto: bf16 where the CPU has native
  /// bf16, else f32 math on their exact f32 values: widened in registers by the fixed-order
  /// kernel, up-converted once here by the oneDNN tiles). `gemm`: the GEMM of every
  /// Linear (kernels/cpu/linear.hpp; kAuto: the fixed-order kernel where the CPU has it).
  /// Keeps no reference to `weights`: the model holds only its prepared copies.
  /// Errors: InvalidArgument when the weights disagree with the config (wrong shapes).
  static absl::StatusOr<std::shared_ptr<const CpuModel>> prepare(
      std::shared_ptr<const model::ModelWeights> weights,
      kernels::cpu::Bf16Compute bf16_compute = kernels::cpu::Bf16Compute::kAuto,
      kernels::cpu::LinearKernel gemm = kernels::cpu::LinearKernel::kAuto);

  const model::ModelConfig& config() const { return config_; }
  /// What the GEMMs on weights compute in: "f32" (f32 weights, or bf16 weights up-converted)
  /// or "bf16" (from the experts' GEMMs; every GEMM of a model takes the same path).
  const char* compute_dtype() const { return compute_dtype_; }
  /// The experts' weights as loaded: "f32" or "bf16".
  const char* weights_dtype() const { return weights_dtype_; }
  /// The GEMM the experts run (kernels/cpu/linear.hpp) and, for the fixed-order one, the ISA
  /// of its kernel: "fixed-order (avx512)", "fixed-order (avx2)", "fixed-order (avx512_bf16)"
  /// (bf16 compute) or "onednn-tiles".
  const char* gemm_kernel() const { return gemm_kernel_; }

  /// Embedding lookup: h[i] = embed[ids[i]]. ids must be in [0, vocab) (checked by the caller:
  /// workloads validate prompts). h: [n, hidden].
  void embed(const int32_t* ids, int64_t n, float* h) const;

  /// The attention half of block `block` (HF MixtralDecoderLayer up to the MoE block):
  ///   h ← h + o_proj(GQA(RoPE(q), RoPE(k), v))   (input RMSNorm first; in place on `h`)
  ///   x = RMSNorm_post(h); router softmax + top-k on x; shared expert on x if any.
  /// `request_ids`, `positions`: [n]; each row's K/V is appended to `kv` at its position,
  /// rows of one request must be consecutive positions continuing the cached length.
  /// h: [n, hidden] f32 in/out. Errors: FailedPrecondition when a position does not continue
  /// its request's cache (nothing after the failing row is appended).
  absl::Status attention(int64_t block, serving::KvCache& kv, const int64_t* request_ids,
                         const int64_t* positions, int64_t n, float* h,
                         const AttentionOutputs& out) const;

  /// One expert's SwiGLU FFN: y[n, hidden] = expert_{block,expert}(x[n, hidden]).
  void expert(int64_t block, int64_t expert, const float* x, int64_t n, float* y) const;
  /// The prepared FFN of one expert (to copy its prepacked weights into a slot).
  const kernels::cpu::ExpertFfn& expert_ffn(int64_t block, int64_t expert) const {
    return *blocks_.at(block).experts.at(expert);
  }

  /// Final RMSNorm + LM head: logits[n, vocab] from h[n, hidden] (h unchanged).
  void logits(const float* h, int64_t n, float* logits) const;

  /// Combine of one token (the MoE block's output added to the residual stream), in a fixed
  /// order so that arrival order never matters:
  ///   acc = Σ_{j=0..k-1} w_j · y_j  (j = top-k rank order);  acc += shared;  h += acc.
  /// h, y_j, shared: [hidden]; shared may be nullptr.
  static void combine_row(float* h, const float* const* expert_rows, const float* weights,
                          int64_t num_topk, const float* shared, int64_t hidden);

 private:
  struct Block {
    std::unique_ptr<kernels::cpu::Linear> qkv, o, router;
    std::vector<std::unique_ptr<kernels::cpu::ExpertFfn>> experts;
    std::unique_ptr<kernels::cpu::ExpertFfn> shared_expert;
    std::vector<float> shared_gate;  ///< [hidden]
    std::vector<float> input_norm, post_attn_norm;  ///< [hidden] each
  };
  explicit CpuModel(model::ModelConfig config) : config_(std::move(config)) {}

  // Only prepared copies: the loaded weights are not kept (they may be released once every
  // user has prepared its copy; see Backend::release_weights).
  model::ModelConfig config_;
  const char* compute_dtype_ = "f32";
  const char* weights_dtype_ = "f32";
  const char* gemm_kernel_ = "onednn-tiles";
  std::vector<Block> blocks_;
  std::unique_ptr<kernels::cpu::Linear> lm_head_;
  std::vector<float> embed_;       ///< [vocab, hidden] f32 copy of the embedding table
  std::vector<float> final_norm_;  ///< [hidden]
};

}  // namespace muflow::engine::exec
