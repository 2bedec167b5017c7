#include "engine/serving/kv_admission.hpp"

#include <limits>

namespace muflow::engine::serving {

int64_t kv_bytes_per_token(const model::ModelConfig& c, int64_t bytes_per_element) {
  return c.num_layers * 2 * c.num_kv_heads * c.head_dim * bytes_per_element;
}

int64_t resident_weight_bytes(const model::ModelConfig& c, bool hosts_attention,
                              int64_t num_experts_hosted, int64_t bytes_per_element) {
  const int64_t H = c.hidden_size, D = c.head_dim;
  int64_t params = 0;
  if (hosts_attention) {
    const int64_t qkv = H * (c.num_heads + 2 * c.num_kv_heads) * D;
    const int64_t o = c.num_heads * D * H;
    const int64_t router = H * c.num_experts;
    const int64_t shared = c.shared_expert_ffn * H * (c.gated_experts ? 3 : 2);
    params += c.num_layers * (qkv + o + router + shared + 2 * H);
    params += c.vocab_size * H * (c.tie_word_embeddings ? 1 : 2) + H;
  }
  const int64_t expert = c.expert_ffn * H * (c.gated_experts ? 3 : 2);
  // The expert weights of a device can exceed int64 for absurd (but bounded) dims: saturate.
  const double bytes = (static_cast<double>(params) +
                        static_cast<double>(c.num_layers) *
                            static_cast<double>(num_experts_hosted) * static_cast<double>(expert)) *
                       static_cast<double>(bytes_per_element);
  if (bytes >= 9.0e18) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(bytes);
}

int32_t pick_rank_most_free_kv(const std::vector<RankKv>& ranks, int64_t max_requests,
                               int64_t need_bytes) {
  int32_t best = -1;
  int64_t best_free = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankKv& k = ranks[r];
    if (k.active_requests >= max_requests) continue;
    const int64_t free = k.capacity_bytes < 0 ? std::numeric_limits<int64_t>::max() -
                                                    k.reserved_bytes
                                              : k.capacity_bytes - k.reserved_bytes;
    if (free < need_bytes) continue;
    if (best < 0 || free > best_free ||
        (free == best_free && k.active_requests < ranks[best].active_requests)) {
      best = static_cast<int32_t>(r);
      best_free = free;
    }
  }
  return best;
}

}  // namespace muflow::engine::serving
