#pragma once
/// \file
/// FLOPs and bytes moved by the ops the stages run, from plain model dims, for the sim
/// backend's roofline (cost_model.hpp). Pure functions of their arguments; callable from any
/// thread.
///
/// Conventions for every function here:
/// - flops count multiply and add separately (a [m,k]·[k,n] GEMM is 2·m·k·n); element-wise
///   work (activations, softmax, norms, rope) is left out of flops: it is memory-bound and
///   its traffic is counted in bytes.
/// - bytes = weights read once per call + activations, each intermediate written once and
///   read once (no fusion assumed beyond what `num_kernels` says) + KV cache traffic.
/// - `w` = precision_bytes(precision) is used for weights, activations and the KV cache.
/// - Dims must be positive and token counts non-negative (trusted sizes; MUFLOW_ASSERT).

#include <cstdint>
#include <span>

#include "kernels/sim/precision.hpp"

namespace muflow::kernels::sim {

/// The work of one op call on a batch. Plain value; costs of a stage add up with `+`.
struct OpCost {
  double flops = 0;     ///< floating-point operations (multiply and add count 2)
  double bytes = 0;     ///< bytes read and written in device memory
  int num_kernels = 0;  ///< kernel launches, each paying DeviceKind::launch_overhead_s

  OpCost& operator+=(const OpCost& o) {
    flops += o.flops;
    bytes += o.bytes;
    num_kernels += o.num_kernels;
    return *this;
  }
  friend OpCost operator+(OpCost a, const OpCost& b) { return a += b; }
};

/// The two expert FFN shapes in the seed models.
enum class FfnKind {
  /// SwiGLU (Mixtral, Qwen-MoE, DeepSeek): down(silu(gate·x) * (up·x)); 3 matrices
  /// [ffn, hidden]; kernels: fused gate|up GEMM, swiglu, down GEMM = 3.
  kSwiGlu,
  /// Two-layer FFN with ReLU/GELU (Switch Transformer): out(relu(in·x)); 2 matrices;
  /// kernels: in GEMM, activation, out GEMM = 3.
  kTwoLayer,
};

/// One expert (or one MoEShard shard of it: pass the shard's `ffn`) on `num_tokens` tokens.
///   m = 3 (SwiGLU) or 2 (two-layer) matrices
///   flops = 2 · num_tokens · hidden · ffn · m
///   bytes = w · m · hidden · ffn                                  (weights)
///         + w · num_tokens · (2·hidden + 6·ffn)   SwiGLU           (x in, [n,2ffn] gate|up
///                                                                   out+in, [n,ffn] h out+in,
///                                                                   y out)
///         + w · num_tokens · (2·hidden + 4·ffn)   two-layer
OpCost expert_ffn_cost(int64_t num_tokens, int64_t hidden, int64_t ffn, Precision precision,
                       FfnKind kind = FfnKind::kSwiGlu);

/// Qwen2-MoE style shared expert: a SwiGLU FFN of width `shared_ffn` over every token, plus,
/// when `gated`, a sigmoid gate hidden -> 1 (2·n·hidden flops, hidden·w weight bytes, one more
/// kernel).
OpCost shared_expert_cost(int64_t num_tokens, int64_t hidden, int64_t shared_ffn,
                          Precision precision, bool gated);

/// Router: logits = x · W_gate^T ([num_experts, hidden]), softmax and top-k.
///   flops = 2 · n · hidden · num_experts
///   bytes = w · hidden · num_experts + w · n · hidden + 4 · n · num_experts · 2 (f32 logits
///           out and in) ; kernels: GEMM, softmax+top-k = 2
OpCost router_cost(int64_t num_tokens, int64_t hidden, int64_t num_experts, Precision precision);

/// LM head: final rms_norm, logits = x · W^T ([vocab, hidden]), sampling.
///   flops = 2 · n · hidden · vocab
///   bytes = w · vocab · hidden + w · n · 3·hidden (norm in/out, GEMM in)
///         + 4 · n · vocab · 2 (f32 logits out and in) ; kernels: norm, GEMM, sampling = 3
OpCost lm_head_cost(int64_t num_tokens, int64_t hidden, int64_t vocab, Precision precision);

/// Attention block dims (grouped-query attention).
struct AttentionDims {
  int64_t hidden = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
};

/// The new tokens of one sequence in a batch: its last `num_tokens` positions of a context
/// of `context_len` tokens (the new ones included). Decode: {1, len}; prefill: {P, P}.
struct AttentionSequence {
  int64_t num_tokens = 0;
  int64_t context_len = 0;  ///< >= num_tokens
};

/// Attention block (pre-norm, qkv projection, rope, causal attention over the KV cache, o
/// projection) for a batch of sequences. With n = Σ num_tokens, q = num_heads·head_dim,
/// kv = num_kv_heads·head_dim, and S = Σ over new tokens of the context each attends to
/// (= num_tokens·context_len − num_tokens·(num_tokens−1)/2 per sequence, causal):
///   flops = 2·n·hidden·(q + 2·kv)     qkv projection
///         + 2·n·q·hidden              o projection
///         + 4·S·q                     scores q·k (2·head_dim per head and key) and p·v (same)
///   bytes = w·hidden·(q + 2·kv) + w·q·hidden                       (weights)
///         + w·n·(3·hidden + 2·(q + 2·kv) + 2·q + hidden)           (norm in/out, qkv out+in,
///                                                                  attention out + o in, o out)
///         + w·2·kv·Σ context_len                                   (KV read, once per
///                                                                  sequence, flash-style)
///         + w·2·kv·n                                               (KV write of new tokens)
/// kernels: norm, qkv GEMM, rope + KV append, attention, o GEMM = 5. A batch without new
/// tokens costs nothing (all zero, no kernels).
/// Precondition (MUFLOW_ASSERT): num_heads % num_kv_heads == 0, 0 <= num_tokens <= context_len.
OpCost attention_cost(const AttentionDims& dims, std::span<const AttentionSequence> sequences,
                      Precision precision);

/// Decode convenience: one new token per sequence, `context_lens[i]` its context length
/// (the new token included).
OpCost decode_attention_cost(const AttentionDims& dims, std::span<const int64_t> context_lens,
                             Precision precision);

}  // namespace muflow::kernels::sim
