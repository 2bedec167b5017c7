#pragma once
/// \file
/// Per-request key/value cache of one attention layer on one data-parallel rank.

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace muflow::engine::serving {

/// Keys and values of every request bound to one attention stage (one block, one DP rank).
///
/// Layout per request: `[len, num_kv_heads * head_dim]` f32 rows for K and for V, position p in
/// row p. Owned by exactly one attention stage actor; not thread-safe.
class KvCache {
 public:
  explicit KvCache(int64_t kv_width) : kv_width_(kv_width) {}

  /// Appends the K and V rows (`kv_width` floats each) of `request_id` at `position`.
  /// Returns false (and appends nothing) unless position == current length: positions must
  /// arrive in order, without gaps or repeats.
  bool append(int64_t request_id, int64_t position, const float* k_row, const float* v_row);

  /// Number of cached positions of a request (0 if unknown).
  int64_t length(int64_t request_id) const;
  /// Which life of the request's entry this is: a process-wide unique number (≥ 1) given when
  /// its first row is appended, so a copy of the cache elsewhere (the cuda backend's device
  /// KV cache) can tell a request that was released and started again from one that only
  /// grew, even at the same length. 0 if unknown.
  uint64_t generation(int64_t request_id) const;
  /// K rows `[length, kv_width]` of a request (nullptr if unknown).
  const float* keys(int64_t request_id) const;
  /// V rows `[length, kv_width]` of a request (nullptr if unknown).
  const float* values(int64_t request_id) const;
  /// Frees a finished request's cache. Unknown ids are ignored.
  void release(int64_t request_id);
  /// Bytes held by all requests.
  int64_t bytes_used() const { return bytes_; }
  int64_t num_requests() const { return static_cast<int64_t>(entries_.size()); }

 private:
  struct Entry {
    std::vector<float> k, v;
    int64_t len = 0;
    uint64_t generation = 0;
  };
  int64_t kv_width_;
  int64_t bytes_ = 0;
  /// A flat table: a lookup is one probe of this stage's table, where the node map it
  /// replaces chased a bucket and a node (every token of every layer looks its request up;
  /// #19 item 6). The rows' pointers (keys(), values()) stay valid when the table moves its
  /// entries: a vector's buffer moves with it.
  absl::flat_hash_map<int64_t, Entry> entries_;
};

}  // namespace muflow::engine::serving
