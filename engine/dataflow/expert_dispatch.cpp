#include "engine/dataflow/expert_dispatch.hpp"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace muflow::engine::dataflow {
namespace {

int64_t rows_of(const TokenBatchPtr& p) { return p ? p->num_tokens() : 0; }

absl::Status check_shape(const DispatchParts& parts, int64_t width) {
  const size_t E = parts.empty() ? 0 : parts.front().size();
  for (size_t src = 0; src < parts.size(); ++src) {
    if (parts[src].size() != E) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "dispatch: rank %d sent parts for %d experts, rank 0 for %d", src, parts[src].size(),
          E));
    }
    for (size_t e = 0; e < E; ++e) {
      const TokenBatchPtr& p = parts[src][e];
      if (!p || p->num_tokens() == 0 || width == 0) continue;
      if (!p->act || p->act->width != width || p->act->num_rows != p->num_tokens()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "dispatch: rank %d expert %d: activations are not [%d, %d]", src, e,
            p->num_tokens(), width));
      }
    }
  }
  return absl::OkStatus();
}

TokenBatchPtr new_destination(int32_t block, int32_t dst, int64_t iteration, int64_t width) {
  return make_batch({StageKind::kExpert, block, dst}, Payload::kExpertInputs, iteration, width);
}

// Appends rows [begin, end) of `part` to `out`.
void append_rows(const TokenBatch& part, int64_t begin, int64_t end, int64_t width,
                 TokenBatch& out) {
  out.tokens.insert(out.tokens.end(), part.tokens.begin() + begin, part.tokens.begin() + end);
  if (width > 0) {
    out.act->data.insert(out.act->data.end(), part.act->data.begin() + begin * width,
                         part.act->data.begin() + end * width);
  }
  out.act->num_rows += end - begin;
}

}  // namespace

absl::StatusOr<std::vector<std::vector<int64_t>>> dispatch_counts(const DispatchParts& parts) {
  if (absl::Status s = check_shape(parts, 0); !s.ok()) return s;
  std::vector<std::vector<int64_t>> counts(parts.size());
  for (size_t src = 0; src < parts.size(); ++src) {
    for (const TokenBatchPtr& p : parts[src]) counts[src].push_back(rows_of(p));
  }
  return counts;
}

absl::StatusOr<std::vector<TokenBatchPtr>> dispatch_by_schedule(
    const DispatchParts& parts, const planning::RebalanceSchedule& schedule, int32_t block,
    int64_t iteration, int64_t width, std::vector<std::vector<int64_t>>* rows_from) {
  if (absl::Status s = check_shape(parts, width); !s.ok()) return s;
  const auto R = static_cast<int64_t>(parts.size());
  const int64_t E = R == 0 ? 0 : static_cast<int64_t>(parts.front().size());
  const int64_t D = schedule.num_ranks;
  if (schedule.num_experts != E || D != R ||
      static_cast<int64_t>(schedule.tokens.size()) != R * E * D) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "dispatch: schedule is [%d, %d, %d], parts are [%d ranks, %d experts]",
        schedule.num_ranks, schedule.num_experts, schedule.num_ranks, R, E));
  }
  for (int64_t src = 0; src < R; ++src) {
    for (int64_t e = 0; e < E; ++e) {
      int64_t sum = 0;
      for (int64_t dst = 0; dst < D; ++dst) {
        if (schedule.at(src, e, dst) < 0) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "dispatch: schedule S[%d, %d, %d] is negative", src, e, dst));
        }
        sum += schedule.at(src, e, dst);
      }
      if (sum != rows_of(parts[src][e])) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "dispatch: schedule moves %d tokens of rank %d expert %d, which sent %d", sum, src,
            e, rows_of(parts[src][e])));
      }
    }
  }
  std::vector<TokenBatchPtr> out(D);
  if (rows_from) rows_from->assign(D, std::vector<int64_t>(R, 0));
  for (int64_t dst = 0; dst < D; ++dst) {
    out[dst] = new_destination(block, static_cast<int32_t>(dst), iteration, width);
    TokenBatch& b = *out[dst];
    for (int64_t e = 0; e < E; ++e) {
      const int64_t seg_begin = b.num_tokens();
      for (int64_t src = 0; src < R; ++src) {
        const int64_t n = schedule.at(src, e, dst);
        if (n == 0) continue;
        int64_t begin = 0;  // rows for earlier destinations come first
        for (int64_t d = 0; d < dst; ++d) begin += schedule.at(src, e, d);
        append_rows(*parts[src][e], begin, begin + n, width, b);
        if (rows_from) (*rows_from)[dst][src] += n;
      }
      if (b.num_tokens() > seg_begin) {
        b.segments.push_back({static_cast<int32_t>(e), seg_begin, b.num_tokens()});
      }
    }
  }
  return out;
}

absl::StatusOr<std::vector<TokenBatchPtr>> dispatch_all_gather(
    const DispatchParts& parts, int64_t num_destinations, int32_t block, int64_t iteration,
    int64_t width, std::vector<std::vector<int64_t>>* rows_from) {
  if (num_destinations < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("dispatch: all-gather to %d destinations", num_destinations));
  }
  if (absl::Status s = check_shape(parts, width); !s.ok()) return s;
  const auto R = static_cast<int64_t>(parts.size());
  const int64_t E = R == 0 ? 0 : static_cast<int64_t>(parts.front().size());
  // Build the gathered batch once, then give each destination its own header sharing the rows.
  TokenBatchPtr all = new_destination(block, 0, iteration, width);
  std::vector<int64_t> per_src(R, 0);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t seg_begin = all->num_tokens();
    for (int64_t src = 0; src < R; ++src) {
      const int64_t n = rows_of(parts[src][e]);
      if (n == 0) continue;
      append_rows(*parts[src][e], 0, n, width, *all);
      per_src[src] += n;
    }
    if (all->num_tokens() > seg_begin) {
      all->segments.push_back({static_cast<int32_t>(e), seg_begin, all->num_tokens()});
    }
  }
  std::vector<TokenBatchPtr> out(num_destinations);
  for (int64_t dst = 0; dst < num_destinations; ++dst) {
    auto b = std::make_shared<TokenBatch>(*all);  // tokens copied; rows shared read-only
    b->layer.index = static_cast<int32_t>(dst);
    out[dst] = std::move(b);
  }
  if (rows_from) rows_from->assign(num_destinations, per_src);
  return out;
}

absl::StatusOr<TokenBatchPtr> reduce_partials(const std::vector<TokenBatchPtr>& partials) {
  const TokenBatch* first = nullptr;
  for (const TokenBatchPtr& p : partials) {
    if (p) {
      first = p.get();
      break;
    }
  }
  if (!first) return TokenBatchPtr{};
  auto out = std::make_shared<TokenBatch>();
  out->layer = first->layer;
  out->payload = first->payload;
  out->iteration = first->iteration;
  out->tokens = first->tokens;
  const int64_t n = first->num_tokens();
  const int64_t width = first->act ? first->act->width : 0;
  out->act = std::make_shared<Activations>(n, width);
  std::fill(out->act->data.begin(), out->act->data.end(), 0.f);
  for (size_t s = 0; s < partials.size(); ++s) {
    const TokenBatchPtr& p = partials[s];
    if (!p) continue;
    const int64_t w = p->act ? p->act->width : 0;
    if (p->num_tokens() != n || w != width || (width > 0 && p->act->num_rows != n)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "reduce-scatter: shard %d sent [%d, %d] rows, the first shard [%d, %d]", s,
          p->num_tokens(), w, n, width));
    }
    for (int64_t i = 0; i < n; ++i) {
      const TokenMeta& a = p->tokens[i];
      const TokenMeta& b = first->tokens[i];
      if (a.request_id != b.request_id || a.position != b.position ||
          a.topk_rank != b.topk_rank) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "reduce-scatter: shard %d row %d is (request %d, position %d, top-k %d), the first "
            "shard's is (request %d, position %d, top-k %d)",
            s, i, a.request_id, a.position, a.topk_rank, b.request_id, b.position,
            b.topk_rank));
      }
    }
    float* acc = out->act->data.data();
    const float* src = p->act ? p->act->data.data() : nullptr;
    for (int64_t j = 0; j < n * width; ++j) acc[j] += src[j];
  }
  return out;
}

}  // namespace muflow::engine::dataflow
