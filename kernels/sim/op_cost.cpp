#include "kernels/sim/op_cost.hpp"

#include <vector>

#include "kernels/assert.hpp"

namespace muflow::kernels::sim {
namespace {

constexpr double kLogitBytes = 4;  // logits are f32 whatever the weight precision

}  // namespace

OpCost expert_ffn_cost(int64_t num_tokens, int64_t hidden, int64_t ffn, Precision precision,
                       FfnKind kind) {
  MUFLOW_ASSERT(num_tokens >= 0 && hidden > 0 && ffn > 0, "expert_ffn_cost: bad dims");
  const double n = static_cast<double>(num_tokens);
  const double h = static_cast<double>(hidden);
  const double f = static_cast<double>(ffn);
  const double w = static_cast<double>(precision_bytes(precision));
  const double m = kind == FfnKind::kSwiGlu ? 3 : 2;
  const double act = kind == FfnKind::kSwiGlu ? 2 * h + 6 * f : 2 * h + 4 * f;
  return OpCost{.flops = 2 * n * h * f * m, .bytes = w * m * h * f + w * n * act, .num_kernels = 3};
}

OpCost shared_expert_cost(int64_t num_tokens, int64_t hidden, int64_t shared_ffn,
                          Precision precision, bool gated) {
  OpCost cost = expert_ffn_cost(num_tokens, hidden, shared_ffn, precision, FfnKind::kSwiGlu);
  if (gated) {
    const double n = static_cast<double>(num_tokens);
    const double h = static_cast<double>(hidden);
    const double w = static_cast<double>(precision_bytes(precision));
    cost += OpCost{.flops = 2 * n * h, .bytes = w * h + w * n * (h + 1), .num_kernels = 1};
  }
  return cost;
}

OpCost router_cost(int64_t num_tokens, int64_t hidden, int64_t num_experts, Precision precision) {
  MUFLOW_ASSERT(num_tokens >= 0 && hidden > 0 && num_experts > 0, "router_cost: bad dims");
  const double n = static_cast<double>(num_tokens);
  const double h = static_cast<double>(hidden);
  const double e = static_cast<double>(num_experts);
  const double w = static_cast<double>(precision_bytes(precision));
  return OpCost{.flops = 2 * n * h * e,
                .bytes = w * h * e + w * n * h + kLogitBytes * n * e * 2,
                .num_kernels = 2};
}

OpCost lm_head_cost(int64_t num_tokens, int64_t hidden, int64_t vocab, Precision precision) {
  MUFLOW_ASSERT(num_tokens >= 0 && hidden > 0 && vocab > 0, "lm_head_cost: bad dims");
  const double n = static_cast<double>(num_tokens);
  const double h = static_cast<double>(hidden);
  const double v = static_cast<double>(vocab);
  const double w = static_cast<double>(precision_bytes(precision));
  return OpCost{.flops = 2 * n * h * v,
                .bytes = w * v * h + w * n * 3 * h + kLogitBytes * n * v * 2,
                .num_kernels = 3};
}

OpCost attention_cost(const AttentionDims& dims, std::span<const AttentionSequence> sequences,
                      Precision precision) {
  MUFLOW_ASSERT(dims.hidden > 0 && dims.num_heads > 0 && dims.num_kv_heads > 0 &&
                    dims.head_dim > 0 && dims.num_heads % dims.num_kv_heads == 0,
                "attention_cost: bad dims");
  double n = 0;            // new tokens
  double score_pairs = 0;  // S: (query, key) pairs over all new tokens
  double context = 0;      // Σ context_len: KV rows read
  for (const AttentionSequence& seq : sequences) {
    MUFLOW_ASSERT(seq.num_tokens >= 0 && seq.num_tokens <= seq.context_len,
                  "attention_cost: need 0 <= num_tokens <= context_len");
    if (seq.num_tokens == 0) continue;
    const double t = static_cast<double>(seq.num_tokens);
    const double c = static_cast<double>(seq.context_len);
    n += t;
    score_pairs += t * c - t * (t - 1) / 2;
    context += c;
  }
  const double h = static_cast<double>(dims.hidden);
  const double q = static_cast<double>(dims.num_heads * dims.head_dim);
  const double kv = static_cast<double>(dims.num_kv_heads * dims.head_dim);
  const double w = static_cast<double>(precision_bytes(precision));
  if (n == 0) return OpCost{};
  const double flops = 2 * n * h * (q + 2 * kv) + 2 * n * q * h + 4 * score_pairs * q;
  const double weights = w * h * (q + 2 * kv) + w * q * h;
  const double activations = w * n * (3 * h + 2 * (q + 2 * kv) + 2 * q + h);
  const double kv_bytes = w * 2 * kv * context + w * 2 * kv * n;
  return OpCost{.flops = flops, .bytes = weights + activations + kv_bytes, .num_kernels = 5};
}

OpCost decode_attention_cost(const AttentionDims& dims, std::span<const int64_t> context_lens,
                             Precision precision) {
  std::vector<AttentionSequence> sequences;
  sequences.reserve(context_lens.size());
  for (int64_t len : context_lens) sequences.push_back({.num_tokens = 1, .context_len = len});
  return attention_cost(dims, sequences, precision);
}

}  // namespace muflow::kernels::sim
