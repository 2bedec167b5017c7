#include "engine/dataflow/token_pool.hpp"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_format.h"
#include "engine/exec/cpu_model.hpp"
#include "kernels/assert.hpp"

namespace muflow::engine::dataflow {

struct TokenPool::Scratch {
  static constexpr size_t kMaxSpare = 8;  ///< removed buckets kept for reuse
  std::vector<std::map<int64_t, Bucket>::node_type> spare;
  std::vector<int64_t> touched;
  std::vector<int64_t> created_buckets;
  std::vector<std::pair<Bucket*, std::pair<int64_t, int64_t>>> created_entries;
  std::vector<Bucket*> switched;
  std::vector<std::pair<Bucket*, uint32_t>> at;
  std::vector<uint32_t> order;
  std::vector<const float*> rows;
};

TokenPool::Scratch& TokenPool::scratch() {
  thread_local Scratch s;
  return s;
}

TokenPool::TokenPool(Readiness readiness, int64_t hidden, int64_t num_topk,
                     int64_t expected_expert_messages, int64_t expected_residual_messages)
    : readiness_(readiness),
      hidden_(hidden),
      num_topk_(num_topk),
      expected_expert_messages_(expected_expert_messages),
      expected_residual_messages_(expected_residual_messages) {
  MUFLOW_ASSERT(num_topk >= 1 && num_topk <= 64, "token pool supports top-1..top-64");
  MUFLOW_ASSERT(expected_residual_messages >= 1, "a pool expects at least one residual batch");
}

TokenPool::TokenPool(int64_t hidden, int64_t num_topk, int64_t expected_expert_messages,
                     int64_t expected_residual_messages)
    : TokenPool(Readiness::kPerIteration, hidden, num_topk, expected_expert_messages,
                expected_residual_messages) {}

TokenPool TokenPool::per_request(int64_t hidden, int64_t num_topk, bool by_wave) {
  TokenPool pool(Readiness::kPerRequest, hidden, num_topk, 0, 1);
  pool.by_wave_ = by_wave;
  return pool;
}

int64_t TokenPool::bucket_key(const TokenBatch& batch, const TokenMeta& m) const {
  if (readiness_ == Readiness::kPerIteration) return batch.iteration;
  return by_wave_ ? m.wave : m.request_id;
}

void TokenPool::Bucket::clear() {
  residual_arrived = false;
  residual_messages = 0;
  expert_messages = 0;
  complete_entries = 0;
  in_ready_order = false;
  runs.clear();
  hashed = false;
  index.clear();
  slots.clear();
  keys.clear();
}

// `position - first` as unsigned when position >= first (no signed overflow for any positions
// a peer sends).
inline uint64_t offset_from(int64_t position, int64_t first) {
  return static_cast<uint64_t>(position) - static_cast<uint64_t>(first);
}

int64_t TokenPool::Bucket::find_in_runs(int64_t request_id, int64_t position) const {
  for (const Run& r : runs) {
    if (r.request_id == request_id && position >= r.first_position &&
        offset_from(position, r.first_position) < r.count) {
      return static_cast<int64_t>(r.first_slot + offset_from(position, r.first_position));
    }
  }
  return -1;
}

TokenPool::Entry* TokenPool::Bucket::find(int64_t request_id, int64_t position) {
  if (!hashed) {
    const int64_t slot = find_in_runs(request_id, position);
    return slot < 0 ? nullptr : &slots[static_cast<size_t>(slot)];
  }
  const auto it = index.find({request_id, position});
  return it == index.end() ? nullptr : &slots[it->second];
}

uint32_t TokenPool::Bucket::find_or_add(int64_t request_id, int64_t position, bool* added) {
  const auto slot = static_cast<uint32_t>(slots.size());
  if (hashed) {
    const auto [it, inserted] = index.try_emplace({request_id, position}, slot);
    if (inserted) {
      slots.emplace_back();
      keys.emplace_back(request_id, position);
    }
    if (added != nullptr) *added = inserted;
    return it->second;
  }
  if (const int64_t found = find_in_runs(request_id, position); found >= 0) {
    if (added != nullptr) *added = false;
    return static_cast<uint32_t>(found);
  }
  slots.emplace_back();
  keys.emplace_back(request_id, position);
  if (added != nullptr) *added = true;
  append_run(request_id, position, slot);
  if (runs.size() > kMaxRuns) {  // many requests or scattered positions: a hash index
    hashed = true;
    runs.clear();
    index.reserve(2 * keys.size());
    for (size_t i = 0; i < keys.size(); ++i) index.emplace(keys[i], static_cast<uint32_t>(i));
  }
  return slot;
}

void TokenPool::Bucket::append_run(int64_t request_id, int64_t position, uint32_t slot) {
  if (!runs.empty()) {
    Run& last = runs.back();
    if (last.request_id == request_id && position > last.first_position &&
        offset_from(position, last.first_position) == last.count &&
        last.first_slot + last.count == slot) {
      ++last.count;
      return;
    }
  }
  runs.push_back({request_id, position, slot, 1});
}

void TokenPool::Bucket::unhash() {
  MUFLOW_ASSERT(hashed, "TokenPool::Bucket::unhash of a bucket without an index");
  hashed = false;
  index.clear();
  runs.clear();
  for (size_t i = 0; i < keys.size(); ++i) {
    append_run(keys[i].first, keys[i].second, static_cast<uint32_t>(i));
  }
  MUFLOW_ASSERT(runs.size() <= kMaxRuns, "TokenPool::Bucket::unhash: more runs than it keeps");
}

void TokenPool::Bucket::pop_last() {
  if (hashed) {
    index.erase(keys.back());
  } else if (--runs.back().count == 0) {
    runs.pop_back();
  }
  slots.pop_back();
  keys.pop_back();
}

TokenPool::Entry& TokenPool::entry(Bucket& b, int64_t request_id, int64_t position) {
  Entry& e = b.slots[b.find_or_add(request_id, position)];
  if (e.weights.empty()) {
    e.outputs.assign(num_topk_ * hidden_, 0.f);
    e.weights.assign(num_topk_, 0.f);
  }
  return e;
}

bool TokenPool::is_complete(const Bucket& b) const {
  if (!b.residual_arrived) return false;
  if (readiness_ == Readiness::kPerIteration) {
    return b.expert_messages >= expected_expert_messages_;
  }
  return b.complete_entries == b.size();
}

TokenPool::Bucket& TokenPool::bucket(int64_t key, bool* added) {
  auto found = buckets_.lower_bound(key);
  const bool missing = found == buckets_.end() || found->first != key;
  if (added != nullptr) *added = missing;
  if (!missing) return found->second;
  auto& spare = scratch().spare;
  if (spare.empty()) return buckets_.emplace_hint(found, key, Bucket{})->second;
  auto node = std::move(spare.back());
  spare.pop_back();
  node.key() = key;
  return buckets_.insert(found, std::move(node))->second;
}

void TokenPool::remove(std::map<int64_t, Bucket>::iterator found) {
  auto& spare = scratch().spare;
  if (spare.size() >= Scratch::kMaxSpare) {
    buckets_.erase(found);
    return;
  }
  auto node = buckets_.extract(found);
  node.mapped().clear();
  spare.push_back(std::move(node));
}

void TokenPool::note_if_ready(int64_t key) {
  if (readiness_ != Readiness::kPerRequest) return;
  auto found = buckets_.find(key);
  if (found == buckets_.end() || found->second.in_ready_order || !is_complete(found->second)) {
    return;
  }
  found->second.in_ready_order = true;
  ready_order_.push_back(key);
  ready_tokens_ += found->second.size();
}

absl::Status TokenPool::add_residual(const TokenBatch& batch) {
  // Validate everything first, then apply: a rejected batch leaves the pool unchanged.
  const int64_t n = batch.num_tokens();
  const int64_t width = batch.act ? batch.act->width : hidden_;
  if (n > 0 && (!batch.act || (width != hidden_ && width != 2 * hidden_))) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "token pool: residual rows have width %d, expected %d or %d", width, hidden_, 2 * hidden_));
  }
  if (n > 0 && batch.act->num_rows != n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "token pool: residual batch has %d tokens but %d rows", n, batch.act->num_rows));
  }
  if (readiness_ == Readiness::kPerIteration) {
    auto found = buckets_.find(batch.iteration);
    if (found != buckets_.end() && found->second.residual_arrived) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "token pool: %s residual batch for iteration %d",
          expected_residual_messages_ == 1 ? "second" : "one more than expected", batch.iteration));
    }
    if (found != buckets_.end()) {
      for (const TokenMeta& m : batch.tokens) {
        const Entry* e = found->second.find(m.request_id, m.position);
        if (e != nullptr && e->has_residual) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "token pool: request %d position %d added twice", m.request_id, m.position));
        }
      }
    }
  } else {
    for (const TokenMeta& m : batch.tokens) {
      auto found = buckets_.find(bucket_key(batch, m));
      if (found != buckets_.end() && found->second.residual_arrived) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "token pool: second residual for request %d while its group is held (position %d)",
            m.request_id, m.position));
      }
    }
  }
  // A token twice in the batch. Residual batches come in merge order, (request, position)
  // ascending, so a strictly ascending batch is checked in one pass; only another order pays
  // for a sorted copy.
  const auto key_of = [](const TokenMeta& m) { return std::make_pair(m.request_id, m.position); };
  bool ascending = true;
  for (size_t i = 1; i < batch.tokens.size() && ascending; ++i) {
    ascending = key_of(batch.tokens[i - 1]) < key_of(batch.tokens[i]);
  }
  if (!ascending) {
    std::vector<std::pair<int64_t, int64_t>> keys;
    keys.reserve(batch.tokens.size());
    for (const TokenMeta& m : batch.tokens) keys.push_back(key_of(m));
    std::sort(keys.begin(), keys.end());
    for (size_t i = 1; i < keys.size(); ++i) {
      if (keys[i] == keys[i - 1]) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "token pool: request %d position %d added twice", keys[i].first, keys[i].second));
      }
    }
  }
  Bucket* iteration_bucket = nullptr;  // per iteration: every row's bucket
  if (readiness_ == Readiness::kPerIteration) {
    Bucket& b = bucket(batch.iteration);
    iteration_bucket = &b;
    b.residual_arrived = ++b.residual_messages == expected_residual_messages_;
    // Room for the batch's tokens at once: growing `slots` moves every entry (~200 bytes, three
    // vectors each) at each doubling. Geometric, so the several residual batches of an exflow
    // iteration still cost amortised O(1) per token.
    const size_t need = b.slots.size() + static_cast<size_t>(n);
    if (b.slots.capacity() < need) {
      const size_t room = std::max(need, 2 * b.slots.capacity());
      b.slots.reserve(room);
      b.keys.reserve(room);
    }
    // The index on its own: a reused bucket keeps its vectors' capacity, but clearing a large
    // hash table frees it. (Its load factor is at most 7/8.)
    if (b.hashed && b.index.capacity() - b.index.capacity() / 8 < need) {
      b.index.reserve(std::max(need, 2 * b.index.size()));
    }
  }
  // Bucket keys, ascending and unique before use.
  std::vector<int64_t>& touched = scratch().touched;
  touched.clear();
  for (int64_t i = 0; i < n; ++i) {
    const TokenMeta& m = batch.tokens[i];
    const int64_t key = bucket_key(batch, m);
    Bucket& b = iteration_bucket != nullptr ? *iteration_bucket : bucket(key);
    if (readiness_ == Readiness::kPerRequest) b.residual_arrived = true;
    if (touched.empty() || touched.back() != key) touched.push_back(key);
    Entry& e = entry(b, m.request_id, m.position);
    e.has_residual = true;
    e.meta = m;
    const float* row = batch.act->row(i);
    e.residual.assign(row, row + hidden_);
    if (width == 2 * hidden_) e.shared.assign(row + hidden_, row + 2 * hidden_);
    if (e.num_outputs == num_topk_) ++b.complete_entries;
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (int64_t key : touched) note_if_ready(key);
  touched.clear();
  return absl::OkStatus();
}

absl::Status TokenPool::add_expert_outputs(const TokenBatch& batch) {
  // Checks, then each row applied (and all taken back on a duplicate): a rejected message
  // leaves the pool unchanged and does not count toward completion.
  const int64_t n = batch.num_tokens();
  if (n > 0 && (!batch.act || batch.act->width != hidden_)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("token pool: expert output rows have width %d, expected %d",
                        batch.act ? batch.act->width : 0, hidden_));
  }
  if (n > 0 && batch.act->num_rows != n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "token pool: expert output batch has %d tokens but %d rows", n, batch.act->num_rows));
  }
  for (const TokenMeta& m : batch.tokens) {
    if (m.topk_rank < 0 || m.topk_rank >= num_topk_) {
      return absl::InvalidArgumentError(
          absl::StrFormat("token pool: top-k rank %d outside [0, %d)", m.topk_rank, num_topk_));
    }
  }
  // Apply each row to its entry (created when missing, and remembered): a top-k rank that
  // arrived before, or that an earlier row of this batch brought, is a duplicate, and then
  // the rows applied so far are taken back. One lookup and one visit of the entry per row,
  // no sort (#19 item 6: this was a quarter of a 1,024-device simulation).
  std::vector<int64_t>& created_buckets = scratch().created_buckets;
  std::vector<std::pair<Bucket*, std::pair<int64_t, int64_t>>>& created_entries =
      scratch().created_entries;  // in order
  created_buckets.clear();
  created_entries.clear();
  std::vector<Bucket*>& switched = scratch().switched;  // buckets this batch made hash
  switched.clear();
  Bucket* last = nullptr;
  int64_t last_key = 0;
  auto bucket_of = [&](const TokenMeta& m) -> Bucket* {
    const int64_t key = bucket_key(batch, m);
    if (last != nullptr && key == last_key) return last;
    bool inserted = false;
    last = &bucket(key, &inserted);  // std::map: stays valid while others are added
    if (inserted) created_buckets.push_back(key);
    last_key = key;
    return last;
  };
  std::vector<std::pair<Bucket*, uint32_t>>& at = scratch().at;  // each applied row's entry
  at.clear();
  at.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const TokenMeta& m = batch.tokens[i];
    Bucket* b = bucket_of(m);
    bool added = false;
    const bool was_hashed = b->hashed;
    const uint32_t slot = b->find_or_add(m.request_id, m.position, &added);
    if (added) created_entries.push_back({b, {m.request_id, m.position}});
    if (b->hashed && !was_hashed) switched.push_back(b);
    Entry& e = b->slots[slot];
    const uint64_t bit = uint64_t{1} << m.topk_rank;
    if ((e.arrived & bit) == 0) {
      at.emplace_back(b, slot);
      if (e.weights.empty()) {
        e.outputs.assign(num_topk_ * hidden_, 0.f);
        e.weights.assign(num_topk_, 0.f);
      }
      if (hidden_ > 0) {
        const float* row = batch.act->row(i);
        std::copy(row, row + hidden_, e.outputs.begin() + m.topk_rank * hidden_);
      }
      e.weights[m.topk_rank] = m.topk_weight;
      e.arrived |= bit;
      if (++e.num_outputs == num_topk_ && e.has_residual) ++b->complete_entries;
      continue;
    }
    // Take the applied rows back, newest first (an output or weight they wrote stays, but
    // unmarked: a slot counts only with its arrived bit, and the row that sets the bit writes
    // it again), then drop what was created for this batch (each bucket's new entries are the
    // last of its slots, so newest first).
    for (int64_t u = i - 1; u >= 0; --u) {
      const auto [ub, uslot] = at[static_cast<size_t>(u)];
      Entry& ue = ub->slots[uslot];
      if (ue.num_outputs-- == num_topk_ && ue.has_residual) --ub->complete_entries;
      ue.arrived &= ~(uint64_t{1} << batch.tokens[u].topk_rank);
    }
    for (auto c = created_entries.rbegin(); c != created_entries.rend(); ++c) {
      c->first->pop_last();
    }
    for (Bucket* sb : switched) sb->unhash();  // (a created bucket is removed next anyway)
    for (int64_t key : created_buckets) remove(buckets_.find(key));
    at.clear();
    switched.clear();
    return absl::InvalidArgumentError(
        absl::StrFormat("token pool: request %d position %d got top-k rank %d twice", m.request_id,
                        m.position, m.topk_rank));
  }
  at.clear();
  if (readiness_ == Readiness::kPerIteration) {
    ++bucket(batch.iteration).expert_messages;
    return absl::OkStatus();
  }
  // Per request: the groups this batch touched, ascending and unique, may be ready now.
  std::vector<int64_t>& touched = scratch().touched;
  touched.clear();
  for (const TokenMeta& m : batch.tokens) {
    const int64_t key = bucket_key(batch, m);
    if (touched.empty() || touched.back() != key) touched.push_back(key);
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (int64_t key : touched) note_if_ready(key);
  touched.clear();
  return absl::OkStatus();
}

int64_t TokenPool::complete_iteration() const {
  if (readiness_ != Readiness::kPerIteration) return -1;
  for (const auto& [iteration, b] : buckets_) {
    if (is_complete(b)) return iteration;
  }
  return -1;
}

int64_t TokenPool::num_tokens(int64_t iteration) const {
  if (readiness_ != Readiness::kPerIteration) return 0;
  auto found = buckets_.find(iteration);
  return found == buckets_.end() ? 0 : found->second.size();
}

absl::Status TokenPool::merge_into(std::map<int64_t, Bucket>::iterator found, MergedTokens& out) {
  Bucket& b = found->second;
  out.h.reserve(out.h.size() + b.slots.size() * hidden_);
  // Geometric: take_ready merges group after group into one `out`.
  if (const size_t need = out.tokens.size() + b.slots.size(); out.tokens.capacity() < need) {
    out.tokens.reserve(std::max(need, 2 * out.tokens.capacity()));
  }
  // The merge order: (request, position) ascending; keys are unique, so the order is total.
  std::vector<uint32_t>& order = scratch().order;
  order.resize(b.slots.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
  std::sort(order.begin(), order.end(),
            [&](uint32_t x, uint32_t y) { return b.keys[x] < b.keys[y]; });
  std::vector<const float*>& rows = scratch().rows;
  rows.resize(static_cast<size_t>(num_topk_));
  for (const uint32_t slot : order) {
    const std::pair<int64_t, int64_t>& key = b.keys[slot];
    Entry& e = b.slots[slot];
    if (!e.has_residual || e.num_outputs != num_topk_) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "token pool: request %d position %d has %d of %d expert outputs%s (a dropped token)",
          key.first, key.second, e.num_outputs, num_topk_,
          e.has_residual ? "" : " and no residual"));
    }
    for (int64_t j = 0; j < num_topk_; ++j) rows[j] = e.outputs.data() + j * hidden_;
    exec::CpuModel::combine_row(e.residual.data(), rows.data(), e.weights.data(), num_topk_,
                                e.shared.empty() ? nullptr : e.shared.data(), hidden_);
    out.tokens.push_back(e.meta);
    out.h.insert(out.h.end(), e.residual.begin(), e.residual.end());
  }
  remove(found);
  return absl::OkStatus();
}

absl::StatusOr<MergedTokens> TokenPool::take(int64_t iteration) {
  auto found = buckets_.find(iteration);
  if (readiness_ != Readiness::kPerIteration || found == buckets_.end() ||
      !is_complete(found->second)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("token pool: iteration %d is not complete", iteration));
  }
  MergedTokens out;
  out.iteration = iteration;
  if (absl::Status s = merge_into(found, out); !s.ok()) return s;
  return out;
}

int64_t TokenPool::ready_tokens() const {
  if (readiness_ == Readiness::kPerRequest) return ready_tokens_;
  const int64_t it = complete_iteration();
  return it < 0 ? 0 : num_tokens(it);
}

absl::StatusOr<MergedTokens> TokenPool::take_ready(int64_t max_tokens) {
  if (readiness_ == Readiness::kPerIteration) {
    const int64_t it = complete_iteration();
    if (it < 0) return MergedTokens{};
    return take(it);
  }
  MergedTokens out;
  out.iteration = -1;
  while (!ready_order_.empty()) {
    auto found = buckets_.find(ready_order_.front());
    const int64_t size = found->second.size();
    if (!out.tokens.empty() && static_cast<int64_t>(out.tokens.size()) + size > max_tokens) break;
    ready_order_.pop_front();
    ready_tokens_ -= size;
    if (absl::Status s = merge_into(found, out); !s.ok()) return s;
  }
  return out;
}

}  // namespace muflow::engine::dataflow
