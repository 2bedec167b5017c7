#pragma once
/// \file
/// What one source hands a barrier collective per iteration (the parts of its rows for each
/// destination), and how a stage builds it. No CAF here: the collective rules and the stages
/// share it.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "engine/dataflow/token_batch.hpp"
#include "kernels/assert.hpp"

namespace muflow::actors {

/// A collective contribution: the parts for the destinations this source sends rows to, in
/// ascending destination order (`dests[i]` gets `parts[i]`, never null); a destination not
/// listed gets no rows from it. Sparse, so that a rank among 1,024 that sends to a few of
/// 256 experts costs a few entries, not 256 (#19 item 6). Built by one stage actor, then
/// read-only (shared with the collective).
struct Contribution {
  int64_t iteration = 0;
  int32_t source = 0;          ///< contributor index (DP rank for dispatch, expert for combine)
  std::vector<int32_t> dests;  ///< ascending destination slots
  /// [dests.size()], non-null until a point-to-point sender moves them out (a contribution
  /// handed to a collective is shared and never moved from).
  std::vector<engine::dataflow::TokenBatchPtr> parts;
  /// The part for destination `dst`, or null when this source sends it nothing.
  engine::dataflow::TokenBatchPtr part(int32_t dst) const {
    const auto it = std::lower_bound(dests.begin(), dests.end(), dst);
    return it != dests.end() && *it == dst ? parts[static_cast<size_t>(it - dests.begin())]
                                           : nullptr;
  }
  /// The parts as one vector indexed by destination ([num_dests], null where nothing).
  std::vector<engine::dataflow::TokenBatchPtr> dense_parts(size_t num_dests) const {
    std::vector<engine::dataflow::TokenBatchPtr> out(num_dests);
    for (size_t i = 0; i < dests.size(); ++i) {
      if (static_cast<size_t>(dests[i]) < num_dests) out[static_cast<size_t>(dests[i])] = parts[i];
    }
    return out;
  }
};
using ContributionPtr = std::shared_ptr<Contribution>;

/// Reusable scratch of `group_rows`: an index from destination to part that is all -1
/// between calls (only the entries a call used are reset), so grouping a run's rows costs
/// O(rows + destinations used), not O(destinations). One per thread
/// (`thread_group_scratch`), shared by the stages that run on it: a stage's own scratch is
/// cold in cache when it runs once per iteration, one stage among thousands (#19 item 6).
struct GroupScratch {
  std::vector<int32_t> slot;                      ///< [>= num_dests] destination → part, or -1
  std::vector<std::pair<int32_t, int64_t>> used;  ///< (destination, rows) of the current call
};

/// The calling thread's GroupScratch. group_rows does not nest (its callbacks make and fill
/// batches), so one per thread serves every stage that runs on it.
inline GroupScratch& thread_group_scratch() {
  thread_local GroupScratch scratch;
  return scratch;
}

/// `source`'s contribution for `iteration` from `n` rows, row i going to destination
/// `dest_of(i)` in [0, num_dests) (aborts otherwise: callers pass expert ids and ranks of a
/// validated run): `make(dst, rows)` makes the part for `dst` (a non-null TokenBatchPtr with
/// room for its `rows` rows), then `fill(part, i)` appends row i to its part. Parts come in
/// ascending destination order and each part's rows in index order (a stable grouping by
/// destination, each part reserved once for its rows). `dest_of` is called twice per row. If
/// `make` or `fill` throws, the next call first clears what this one left in `scratch`.
template <typename DestOf, typename Make, typename Fill>
ContributionPtr group_rows(int64_t iteration, int32_t source, size_t num_dests, int64_t n,
                           DestOf&& dest_of, Make&& make, Fill&& fill, GroupScratch& scratch) {
  auto c = std::make_shared<Contribution>();
  c->iteration = iteration;
  c->source = source;
  if (n <= 0) return c;
  if (scratch.slot.size() < num_dests) scratch.slot.resize(num_dests, -1);
  for (const auto& [dst, rows] : scratch.used) scratch.slot[static_cast<size_t>(dst)] = -1;
  scratch.used.clear();              // both no-ops unless a previous call threw
  for (int64_t i = 0; i < n; ++i) {  // rows per destination, destinations in first-use order
    const int32_t dst = dest_of(i);
    MUFLOW_ASSERT(dst >= 0 && static_cast<size_t>(dst) < num_dests,
                  "contribution part for a destination outside the collective");
    int32_t& s = scratch.slot[static_cast<size_t>(dst)];
    if (s < 0) {
      s = static_cast<int32_t>(scratch.used.size());
      scratch.used.emplace_back(dst, 0);
    }
    ++scratch.used[static_cast<size_t>(s)].second;
  }
  std::sort(scratch.used.begin(), scratch.used.end());  // distinct destinations
  c->dests.reserve(scratch.used.size());
  c->parts.reserve(scratch.used.size());
  for (size_t p = 0; p < scratch.used.size(); ++p) {
    const auto [dst, rows] = scratch.used[p];
    scratch.slot[static_cast<size_t>(dst)] = static_cast<int32_t>(p);
    c->dests.push_back(dst);
    c->parts.push_back(make(dst, rows));
  }
  for (int64_t i = 0; i < n; ++i) {
    fill(*c->parts[static_cast<size_t>(scratch.slot[static_cast<size_t>(dest_of(i))])], i);
  }
  for (const auto& [dst, rows] : scratch.used) scratch.slot[static_cast<size_t>(dst)] = -1;
  scratch.used.clear();
  return c;
}

}  // namespace muflow::actors
