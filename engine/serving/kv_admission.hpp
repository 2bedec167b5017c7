#pragma once
/// \file
/// Admission by free KV-cache memory (AsyncMoE §3.1: "the load balancer ... assigns each new
/// request to the rank with the most available memory"; the request then stays bound to that
/// attention DP rank). Pure functions: the coordinator owns the state they read.

#include <cstdint>
#include <vector>

#include "engine/model/model_config.hpp"

namespace muflow::engine::serving {

/// KV-cache state of one attention DP rank as the coordinator sees it.
struct RankKv {
  int64_t capacity_bytes = -1;  ///< KV bytes the rank can hold; -1 = unlimited (cpu backend)
  int64_t reserved_bytes = 0;   ///< reserved by admitted, unfinished requests
  int64_t active_requests = 0;  ///< admitted, unfinished requests
};

/// KV-cache bytes one token occupies over all blocks: num_layers · 2 (K and V) ·
/// num_kv_heads · head_dim · `bytes_per_element`.
int64_t kv_bytes_per_token(const model::ModelConfig& c, int64_t bytes_per_element);

/// Weight bytes resident on a device that hosts attention for every block (when
/// `hosts_attention`, plus embedding and LM head) and `num_experts_hosted` experts of every
/// block, at `bytes_per_element`: what the device's memory holds before any KV cache.
int64_t resident_weight_bytes(const model::ModelConfig& c, bool hosts_attention,
                              int64_t num_experts_hosted, int64_t bytes_per_element);

/// The rank a request needing `need_bytes` of KV cache (prompt + output tokens) is admitted
/// to: among ranks with fewer than `max_requests` active requests whose free memory
/// (capacity − reserved, unlimited capacity counts as the most) holds `need_bytes`, the one
/// with the most free memory; ties → fewer active requests, then the lower rank. -1 when no
/// rank can take it now.
int32_t pick_rank_most_free_kv(const std::vector<RankKv>& ranks, int64_t max_requests,
                               int64_t need_bytes);

}  // namespace muflow::engine::serving
