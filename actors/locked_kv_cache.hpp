#pragma once
/// \file
/// One attention layer's KV cache with the lock its users take around every call.

#include <cstdint>
#include <mutex>

#include "engine/serving/kv_cache.hpp"

namespace muflow::actors {

/// An engine::serving::KvCache and its mutex. An attention stage owns one (WiringRun::kv_cache may
/// hand one to several stages); every call on `cache` holds `mutex`.
struct LockedKvCache {
  /// `kv_width`: K (and V) floats per token row (num_kv_heads · head_dim; 0 in simulation).
  explicit LockedKvCache(int64_t kv_width) : cache(kv_width) {}
  std::mutex mutex;
  engine::serving::KvCache cache;
};

}  // namespace muflow::actors
