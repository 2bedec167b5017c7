#pragma once
/// \file
/// The KV cache of one GPU executor: a paged pool on the device that mirrors the host
/// KvCaches of its attention stages (issue #20). The host cache (engine/serving/kv_cache.hpp)
/// stays the authority: admission, replication (KvRows) and release read it; the device
/// copy is what attention reads. Before each attention run the mirror brings a request's
/// device rows up to the host's (rows that reached the host another way, e.g. a replica's
/// apply_kv_rows, are uploaded) and drops requests the host released or restarted (another
/// KvCache::generation, or fewer rows).

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/dataflow/token_batch.hpp"
#include "engine/exec/cuda_model.hpp"
#include "engine/serving/kv_cache.hpp"
#include "kernels/cuda/device_buffer.hpp"

namespace muflow::engine::exec {

/// Paged K/V rows on one GPU (kernels/cuda/attention.hpp for the page layout). Owned by one
/// executor; its calls come one at a time (see Executor).
class CudaKvCache {
 public:
  /// kv_width: floats per K (and per V) row, num_kv_heads · head_dim.
  explicit CudaKvCache(int64_t kv_width) : kv_width_(kv_width) {}

  /// Where a batch's rows go and what each attends to, host-side int32 vectors for upload:
  /// [rows] page/slot of row i's new K/V, table_start[i] into `table` (its request's pages,
  /// in order), context_len[i] = position + 1; `table` holds each request of the batch's page
  /// list once (its length the sum of their page counts), rows of one request sharing it.
  struct Plan {
    std::vector<int32_t> page, slot, table_start, context_len, table;
  };

  /// Syncs the device copy of `host`'s requests in `tokens` (rows the host has that the device
  /// lacks are uploaded on `stream`), drops this host cache's requests whose host length fell
  /// below the device's (released or restarted), allocates pages for the batch's rows (their
  /// positions already checked to continue the host cache) and returns the plan. Device
  /// lengths count the batch's rows from here on. Errors: ResourceExhausted when the pool
  /// cannot grow; scratch allocation errors.
  absl::StatusOr<Plan> prepare(const serving::KvCache& host,
                               const std::vector<dataflow::TokenMeta>& tokens, CudaScratch& scratch,
                               int scratch_slot, cudaStream_t stream);

  /// The sync step of `prepare` alone, for `request_ids` (distinct): drops released or
  /// restarted requests of `host`, then uploads the rows the host has and the device lacks
  /// (asynchronously on `stream`). Errors: as prepare.
  absl::Status sync(const serving::KvCache& host, const std::vector<int64_t>& request_ids,
                    CudaScratch& scratch, int scratch_slot, cudaStream_t stream);

  /// After the batch's rows reached `host` too (the executor appends them there once the
  /// device is done): records the host entries' generations, which a request's first rows
  /// create, so the next sync keeps these device rows.
  void committed(const serving::KvCache& host, const std::vector<dataflow::TokenMeta>& tokens);

  /// The device pool (page p at p · kv_page_floats(kv_width)); changes when the pool grows.
  float* pool() const { return pool_.as<float>(); }
  int64_t pages_in_use() const { return capacity_ - static_cast<int64_t>(free_.size()); }

 private:
  struct Entry {
    std::vector<int32_t> pages;
    int64_t len = 0;
    uint64_t generation = 0;  ///< the host entry's (KvCache::generation) these rows copy
  };
  absl::StatusOr<int32_t> allocate_page(cudaStream_t stream);
  void free_entry(Entry& e);

  int64_t kv_width_;
  int64_t capacity_ = 0;  // pages
  kernels::cuda::DeviceBuffer pool_;
  std::vector<int32_t> free_;
  absl::flat_hash_map<const serving::KvCache*, absl::flat_hash_map<int64_t, Entry>> entries_;
};

}  // namespace muflow::engine::exec
