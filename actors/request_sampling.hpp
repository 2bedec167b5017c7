#pragma once
/// \file
/// Per-request sampling parameters of a long-lived engine: what an HTTP request's
/// `temperature`, `top_p`, `seed` and `ignore_eos` set, read by the sampler stages.

#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/dataflow/token_batch.hpp"
#include "engine/topology/topology.hpp"

namespace muflow::actors {

/// Request id → its sampling parameters, for requests that override the topology's
/// `[sampling]`. Written by the coordinator actor (a request's entry is set when it is
/// submitted and erased when it finishes), read by sampler stages on their device threads:
/// every call takes the mutex, so any thread may call it. Holds one entry per unfinished
/// request with an override (bounded by the engine's admission limit).
class RequestSamplingTable {
 public:
  void set(int64_t request_id, const engine::topology::SamplingSpec& spec) {
    std::lock_guard<std::mutex> lock(mutex_);
    specs_[request_id] = spec;
  }
  void erase(int64_t request_id) {
    std::lock_guard<std::mutex> lock(mutex_);
    specs_.erase(request_id);
  }
  /// One spec per row of `rows`: the row's request's override, else `fallback`.
  std::vector<engine::topology::SamplingSpec> for_rows(
      const std::vector<engine::dataflow::TokenMeta>& rows,
      const engine::topology::SamplingSpec& fallback) const {
    std::vector<engine::topology::SamplingSpec> out(rows.size(), fallback);
    std::lock_guard<std::mutex> lock(mutex_);
    if (specs_.empty()) return out;
    for (size_t i = 0; i < rows.size(); ++i) {
      auto it = specs_.find(rows[i].request_id);
      if (it != specs_.end()) out[i] = it->second;
    }
    return out;
  }

 private:
  mutable std::mutex mutex_;
  absl::flat_hash_map<int64_t, engine::topology::SamplingSpec> specs_;
};

}  // namespace muflow::actors
