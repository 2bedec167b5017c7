#include "engine/exec/cuda_kv_cache.hpp"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "kernels/cuda/attention.hpp"

namespace muflow::engine::exec {
namespace {
namespace kc = kernels::cuda;
constexpr int64_t kInitialPages = 256;
}  // namespace

absl::StatusOr<int32_t> CudaKvCache::allocate_page(cudaStream_t stream) {
  if (free_.empty()) {
    const int64_t grown = std::max(kInitialPages, 2 * capacity_);
    if (grown > INT32_MAX) return absl::ResourceExhaustedError("cuda KV cache: too many pages");
    const std::size_t page_bytes = kc::kv_page_floats(kv_width_) * sizeof(float);
    kc::DeviceBuffer bigger;
    if (cudaError_t e = bigger.allocate(grown * page_bytes); e != cudaSuccess) {
      return cuda_status(e, absl::StrFormat("growing the KV cache to %d pages (%d bytes)", grown,
                                            grown * page_bytes));
    }
    if (capacity_ > 0) {
      if (cudaError_t e = cudaMemcpyAsync(bigger.get(), pool_.get(), capacity_ * page_bytes,
                                          cudaMemcpyDeviceToDevice, stream);
          e != cudaSuccess) {
        return cuda_status(e, "copying the KV cache");
      }
      // The old pool is freed below (cudaFree waits for the device), after the copy.
    }
    pool_ = std::move(bigger);
    for (int64_t p = grown - 1; p >= capacity_; --p) free_.push_back(static_cast<int32_t>(p));
    capacity_ = grown;
  }
  const int32_t p = free_.back();
  free_.pop_back();
  return p;
}

void CudaKvCache::free_entry(Entry& e) {
  for (int32_t p : e.pages) free_.push_back(p);
  e.pages.clear();
  e.len = 0;
}

absl::Status CudaKvCache::sync(const serving::KvCache& host,
                               const std::vector<int64_t>& request_ids, CudaScratch& scratch,
                               int scratch_slot, cudaStream_t stream) {
  auto& mine = entries_[&host];
  for (auto it = mine.begin(); it != mine.end();) {
    if (host.generation(it->first) != it->second.generation ||
        host.length(it->first) < it->second.len) {
      free_entry(it->second);
      mine.erase(it++);
    } else {
      ++it;
    }
  }
  // Rows the host holds and the device lacks (in order: request, position), staged as
  // [rows, 2·kv_width] K|V, then page ids and slots.
  std::vector<float> stage;
  std::vector<int32_t> stage_page, stage_slot;
  for (int64_t rid : request_ids) {
    Entry& e = mine[rid];
    if (e.generation != host.generation(rid)) {  // new here, or swept above and recreated
      free_entry(e);
      e.generation = host.generation(rid);
    }
    const int64_t host_len = host.length(rid);
    const float* k = host.keys(rid);
    const float* v = host.values(rid);
    for (int64_t pos = e.len; pos < host_len; ++pos) {
      if (pos / kc::kKvPageTokens >= static_cast<int64_t>(e.pages.size())) {
        absl::StatusOr<int32_t> p = allocate_page(stream);
        if (!p.ok()) return p.status();
        e.pages.push_back(*p);
      }
      stage.insert(stage.end(), k + pos * kv_width_, k + (pos + 1) * kv_width_);
      stage.insert(stage.end(), v + pos * kv_width_, v + (pos + 1) * kv_width_);
      stage_page.push_back(e.pages[pos / kc::kKvPageTokens]);
      stage_slot.push_back(static_cast<int32_t>(pos % kc::kKvPageTokens));
    }
    e.len = std::max(e.len, host_len);
  }
  if (stage_page.empty()) return absl::OkStatus();
  const auto rows = static_cast<int64_t>(stage_page.size());
  const std::size_t float_bytes = stage.size() * sizeof(float);
  const std::size_t bytes = float_bytes + 2 * rows * sizeof(int32_t);
  absl::StatusOr<void*> buf = scratch.get(scratch_slot, bytes);
  if (!buf.ok()) return buf.status();
  auto* dst = static_cast<unsigned char*>(*buf);
  stage.resize(stage.size() + 2 * rows);  // room for the ints after the floats
  std::memcpy(reinterpret_cast<unsigned char*>(stage.data()) + float_bytes, stage_page.data(),
              rows * sizeof(int32_t));
  std::memcpy(reinterpret_cast<unsigned char*>(stage.data()) + float_bytes + rows * sizeof(int32_t),
              stage_slot.data(), rows * sizeof(int32_t));
  if (cudaError_t e = cudaMemcpyAsync(dst, stage.data(), bytes, cudaMemcpyHostToDevice, stream);
      e != cudaSuccess) {
    return cuda_status(e, "uploading KV rows");
  }
  const auto* pages = reinterpret_cast<const int32_t*>(dst + float_bytes);
  kc::kv_write(pool(), kv_width_, reinterpret_cast<const float*>(dst), 2 * kv_width_, 0, pages,
               pages + rows, rows, stream);
  return absl::OkStatus();
}

void CudaKvCache::committed(const serving::KvCache& host,
                            const std::vector<dataflow::TokenMeta>& tokens) {
  auto& mine = entries_[&host];
  for (const dataflow::TokenMeta& t : tokens) {
    auto it = mine.find(t.request_id);
    if (it != mine.end()) it->second.generation = host.generation(t.request_id);
  }
}

absl::StatusOr<CudaKvCache::Plan> CudaKvCache::prepare(
    const serving::KvCache& host, const std::vector<dataflow::TokenMeta>& tokens,
    CudaScratch& scratch, int scratch_slot, cudaStream_t stream) {
  std::vector<int64_t> order;  // distinct requests, first-seen order
  {
    absl::flat_hash_map<int64_t, bool> seen;
    for (const dataflow::TokenMeta& t : tokens) {
      if (seen.emplace(t.request_id, true).second) order.push_back(t.request_id);
    }
  }
  if (absl::Status s = sync(host, order, scratch, scratch_slot, stream); !s.ok()) return s;
  auto& mine = entries_[&host];
  Plan plan;
  const auto n = static_cast<int64_t>(tokens.size());
  plan.page.resize(n);
  plan.slot.resize(n);
  plan.table_start.resize(n);
  plan.context_len.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const dataflow::TokenMeta& t = tokens[i];
    Entry& e = mine[t.request_id];
    // Positions were checked to continue the host cache, so this row lands at e.len.
    const int64_t pos = t.position;
    if (pos / kc::kKvPageTokens >= static_cast<int64_t>(e.pages.size())) {
      absl::StatusOr<int32_t> p = allocate_page(stream);
      if (!p.ok()) return p.status();
      e.pages.push_back(*p);
    }
    plan.page[i] = e.pages[pos / kc::kKvPageTokens];
    plan.slot[i] = static_cast<int32_t>(pos % kc::kKvPageTokens);
    plan.context_len[i] = static_cast<int32_t>(pos + 1);
    e.len = std::max(e.len, pos + 1);
  }
  absl::flat_hash_map<int64_t, int64_t> table_offset;
  for (int64_t rid : order) {
    table_offset[rid] = static_cast<int64_t>(plan.table.size());
    const Entry& e = mine[rid];
    plan.table.insert(plan.table.end(), e.pages.begin(), e.pages.end());
  }
  for (int64_t i = 0; i < n; ++i) {
    plan.table_start[i] = static_cast<int32_t>(table_offset[tokens[i].request_id]);
  }
  return plan;
}

}  // namespace muflow::engine::exec
