#include "engine/serving/kv_cache.hpp"

#include <atomic>

namespace muflow::engine::serving {
namespace {
// Entries' generations, unique in the process (caches of several stages and runs).
std::atomic<uint64_t> next_generation{1};
}  // namespace

bool KvCache::append(int64_t request_id, int64_t position, const float* k_row,
                     const float* v_row) {
  auto found = entries_.find(request_id);
  if (position != (found == entries_.end() ? 0 : found->second.len)) return false;
  Entry& e = found == entries_.end() ? entries_[request_id] : found->second;
  if (e.generation == 0) e.generation = next_generation.fetch_add(1, std::memory_order_relaxed);
  e.k.insert(e.k.end(), k_row, k_row + kv_width_);
  e.v.insert(e.v.end(), v_row, v_row + kv_width_);
  ++e.len;
  bytes_ += 2 * kv_width_ * static_cast<int64_t>(sizeof(float));
  return true;
}

int64_t KvCache::length(int64_t request_id) const {
  auto it = entries_.find(request_id);
  return it == entries_.end() ? 0 : it->second.len;
}

uint64_t KvCache::generation(int64_t request_id) const {
  auto it = entries_.find(request_id);
  return it == entries_.end() ? 0 : it->second.generation;
}

const float* KvCache::keys(int64_t request_id) const {
  auto it = entries_.find(request_id);
  return it == entries_.end() ? nullptr : it->second.k.data();
}

const float* KvCache::values(int64_t request_id) const {
  auto it = entries_.find(request_id);
  return it == entries_.end() ? nullptr : it->second.v.data();
}

void KvCache::release(int64_t request_id) {
  auto it = entries_.find(request_id);
  if (it == entries_.end()) return;
  bytes_ -= 2 * it->second.len * kv_width_ * static_cast<int64_t>(sizeof(float));
  entries_.erase(it);
}

}  // namespace muflow::engine::serving
