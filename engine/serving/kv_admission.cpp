#include "engine/serving/kv_admission.hpp"

#include <limits>

#include "engine/model/model_memory.hpp"

namespace muflow::engine::serving {

int64_t kv_bytes_per_token(const model::ModelConfig& c, int64_t bytes_per_element) {
  return c.num_layers * 2 * c.num_kv_heads * c.head_dim * bytes_per_element;
}

int64_t resident_weight_bytes(const model::ModelConfig& c, bool hosts_attention,
                              int64_t num_experts_hosted, int64_t bytes_per_element) {
  // Saturates instead of overflowing for absurd (but bounded) dims.
  const double bytes = model::weight_bytes(c, hosts_attention, num_experts_hosted,
                                           static_cast<double>(bytes_per_element));
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
