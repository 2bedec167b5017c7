#include "engine/model/weight_shapes.hpp"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

namespace muflow::engine::model {
namespace {

absl::Status check_shape(const WeightTensor& t, const std::vector<int64_t>& expected) {
  if (t.shape == expected) return absl::OkStatus();
  std::string got, want;
  for (int64_t d : t.shape) got += absl::StrFormat("%s%d", got.empty() ? "" : ",", d);
  for (int64_t d : expected) want += absl::StrFormat("%s%d", want.empty() ? "" : ",", d);
  return absl::InvalidArgumentError(
      absl::StrFormat("tensor '%s' has shape [%s], expected [%s]", t.name, got, want));
}

using Expected = std::vector<std::pair<const WeightTensor*, std::vector<int64_t>>>;

absl::Status check_all(const Expected& expected) {
  for (const auto& [t, shape] : expected) {
    if (absl::Status s = check_shape(*t, shape); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status check_weight_shapes(const ModelWeights& weights) {
  const ModelConfig& c = weights.config;
  if (absl::Status s = c.validate(); !s.ok()) return s;
  const int64_t H = c.hidden_size, qd = c.num_heads * c.head_dim, kvd = c.num_kv_heads * c.head_dim;
  if (absl::Status s = check_all({{&weights.embed, {c.vocab_size, H}},
                                  {&weights.final_norm, {H}},
                                  {&weights.lm_head, {c.vocab_size, H}}});
      !s.ok()) {
    return s;
  }
  if (static_cast<int64_t>(weights.blocks.size()) != c.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrFormat("model has %d blocks, config says num_hidden_layers = %d",
                        weights.blocks.size(), c.num_layers));
  }
  for (int64_t b = 0; b < c.num_layers; ++b) {
    const BlockWeights& bw = weights.blocks[b];
    if (absl::Status s = check_all({{&bw.input_norm, {H}},
                                    {&bw.post_attn_norm, {H}},
                                    {&bw.q, {qd, H}},
                                    {&bw.k, {kvd, H}},
                                    {&bw.v, {kvd, H}},
                                    {&bw.o, {H, qd}},
                                    {&bw.router, {c.num_experts, H}}});
        !s.ok()) {
      return s;
    }
    if (static_cast<int64_t>(bw.experts.size()) != c.num_experts) {
      return absl::InvalidArgumentError(absl::StrFormat("block %d has %d experts, config says %d",
                                                        b, bw.experts.size(), c.num_experts));
    }
    for (const ExpertWeights& e : bw.experts) {
      if (absl::Status s = check_all({{&e.gate, {c.expert_ffn, H}},
                                      {&e.up, {c.expert_ffn, H}},
                                      {&e.down, {H, c.expert_ffn}}});
          !s.ok()) {
        return s;
      }
    }
    if (c.shared_expert_ffn > 0) {
      const ExpertWeights& se = bw.shared_expert;
      if (absl::Status s = check_all({{&se.gate, {c.shared_expert_ffn, H}},
                                      {&se.up, {c.shared_expert_ffn, H}},
                                      {&se.down, {H, c.shared_expert_ffn}},
                                      {&bw.shared_expert_gate, {1, H}}});
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> fused_qkv_bias(const ModelConfig& c, const BlockWeights& bw,
                                                  int64_t block) {
  std::vector<float> bias;
  if (!c.attention_bias) return bias;
  for (const WeightTensor* t : {&bw.q_bias, &bw.k_bias, &bw.v_bias}) {
    std::vector<float> f = t->to_f32();
    if (static_cast<int64_t>(f.size()) != t->rows() || f.empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("tensor '%s' missing or empty (attention bias)", t->name));
    }
    bias.insert(bias.end(), f.begin(), f.end());
  }
  const int64_t expected = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  if (static_cast<int64_t>(bias.size()) != expected) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "block %d: q/k/v biases have %d values, expected %d", block, bias.size(), expected));
  }
  return bias;
}

}  // namespace muflow::engine::model
