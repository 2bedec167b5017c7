#include "engine/token_pool.hpp"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_format.h"
#include "engine/cpu_model.hpp"
#include "kernels/assert.hpp"

namespace muflow::engine {

TokenPool::TokenPool(int64_t hidden, int64_t num_topk, int64_t expected_expert_messages)
    : hidden_(hidden), num_topk_(num_topk), expected_expert_messages_(expected_expert_messages) {
  MUFLOW_ASSERT(num_topk >= 1 && num_topk <= 64, "token pool supports top-1..top-64");
}

TokenPool::Entry& TokenPool::entry(Iteration& it, int64_t request_id, int64_t position) {
  Entry& e = it.entries[{request_id, position}];
  if (e.weights.empty()) {
    e.outputs.assign(num_topk_ * hidden_, 0.f);
    e.weights.assign(num_topk_, 0.f);
  }
  return e;
}

absl::Status TokenPool::add_residual(const TokenBatch& batch) {
  // Validate everything first, then apply: a rejected batch leaves the pool unchanged.
  const int64_t n = batch.num_tokens();
  const int64_t width = batch.act ? batch.act->width : hidden_;
  if (n > 0 && (!batch.act || (width != hidden_ && width != 2 * hidden_))) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "token pool: residual rows have width %d, expected %d or %d", width, hidden_,
        2 * hidden_));
  }
  if (n > 0 && batch.act->num_rows != n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "token pool: residual batch has %d tokens but %d rows", n, batch.act->num_rows));
  }
  auto found = iterations_.find(batch.iteration);
  if (found != iterations_.end() && found->second.residual_arrived) {
    return absl::InvalidArgumentError(
        absl::StrFormat("token pool: second residual batch for iteration %d", batch.iteration));
  }
  std::vector<std::pair<int64_t, int64_t>> keys;
  keys.reserve(batch.tokens.size());
  for (const TokenMeta& m : batch.tokens) keys.emplace_back(m.request_id, m.position);
  std::sort(keys.begin(), keys.end());
  for (size_t i = 1; i < keys.size(); ++i) {
    if (keys[i] == keys[i - 1]) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "token pool: request %d position %d added twice", keys[i].first, keys[i].second));
    }
  }
  Iteration& it = iterations_[batch.iteration];
  it.residual_arrived = true;
  for (int64_t i = 0; i < n; ++i) {
    const TokenMeta& m = batch.tokens[i];
    Entry& e = entry(it, m.request_id, m.position);
    e.has_residual = true;
    e.meta = m;
    const float* row = batch.act->row(i);
    e.residual.assign(row, row + hidden_);
    if (width == 2 * hidden_) e.shared.assign(row + hidden_, row + 2 * hidden_);
  }
  return absl::OkStatus();
}

absl::Status TokenPool::add_expert_outputs(const TokenBatch& batch) {
  // Validate everything first, then apply: a rejected message leaves the pool unchanged and
  // does not count toward completion.
  const int64_t n = batch.num_tokens();
  if (n > 0 && (!batch.act || batch.act->width != hidden_)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "token pool: expert output rows have width %d, expected %d",
        batch.act ? batch.act->width : 0, hidden_));
  }
  if (n > 0 && batch.act->num_rows != n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "token pool: expert output batch has %d tokens but %d rows", n, batch.act->num_rows));
  }
  auto found = iterations_.find(batch.iteration);
  auto duplicate = [](const TokenMeta& m) {
    return absl::InvalidArgumentError(
        absl::StrFormat("token pool: request %d position %d got top-k rank %d twice",
                        m.request_id, m.position, m.topk_rank));
  };
  std::vector<std::tuple<int64_t, int64_t, int16_t>> keys;
  keys.reserve(batch.tokens.size());
  for (const TokenMeta& m : batch.tokens) {
    if (m.topk_rank < 0 || m.topk_rank >= num_topk_) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "token pool: top-k rank %d outside [0, %d)", m.topk_rank, num_topk_));
    }
    if (found != iterations_.end()) {
      auto e = found->second.entries.find({m.request_id, m.position});
      if (e != found->second.entries.end() && ((e->second.arrived >> m.topk_rank) & 1u)) {
        return duplicate(m);
      }
    }
    keys.emplace_back(m.request_id, m.position, m.topk_rank);
  }
  std::sort(keys.begin(), keys.end());
  for (size_t i = 1; i < keys.size(); ++i) {
    if (keys[i] == keys[i - 1]) {
      TokenMeta m;
      std::tie(m.request_id, m.position, m.topk_rank) = keys[i];
      return duplicate(m);
    }
  }
  Iteration& it = iterations_[batch.iteration];
  ++it.expert_messages;
  for (int64_t i = 0; i < n; ++i) {
    const TokenMeta& m = batch.tokens[i];
    Entry& e = entry(it, m.request_id, m.position);
    const float* row = batch.act->row(i);
    std::copy(row, row + hidden_, e.outputs.begin() + m.topk_rank * hidden_);
    e.weights[m.topk_rank] = m.topk_weight;
    e.arrived |= uint64_t{1} << m.topk_rank;
    ++e.num_outputs;
  }
  return absl::OkStatus();
}

int64_t TokenPool::complete_iteration() const {
  for (const auto& [iteration, it] : iterations_) {
    if (it.residual_arrived && it.expert_messages >= expected_expert_messages_) return iteration;
  }
  return -1;
}

int64_t TokenPool::num_tokens(int64_t iteration) const {
  auto found = iterations_.find(iteration);
  return found == iterations_.end() ? 0 : static_cast<int64_t>(found->second.entries.size());
}

absl::StatusOr<MergedTokens> TokenPool::take(int64_t iteration) {
  auto found = iterations_.find(iteration);
  if (found == iterations_.end() || !found->second.residual_arrived ||
      found->second.expert_messages < expected_expert_messages_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("token pool: iteration %d is not complete", iteration));
  }
  MergedTokens out;
  out.iteration = iteration;
  out.h.reserve(found->second.entries.size() * hidden_);
  for (auto& [key, e] : found->second.entries) {
    if (!e.has_residual || e.num_outputs != num_topk_) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "token pool: request %d position %d has %d of %d expert outputs%s (a dropped token)",
          key.first, key.second, e.num_outputs, num_topk_,
          e.has_residual ? "" : " and no residual"));
    }
    std::vector<const float*> rows(num_topk_);
    for (int64_t j = 0; j < num_topk_; ++j) rows[j] = e.outputs.data() + j * hidden_;
    CpuModel::combine_row(e.residual.data(), rows.data(), e.weights.data(), num_topk_,
                          e.shared.empty() ? nullptr : e.shared.data(), hidden_);
    out.tokens.push_back(e.meta);
    out.h.insert(out.h.end(), e.residual.begin(), e.residual.end());
  }
  iterations_.erase(found);
  return out;
}

}  // namespace muflow::engine
