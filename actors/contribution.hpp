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

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "engine/dataflow/token_batch.hpp"
#include "kernels/assert.hpp"

namespace muflow::actors {

/// A collective contribution, in one of two forms:
/// - split: the parts for the destinations this source sends rows to, in ascending
///   destination order (`dests[i]` gets `parts[i]`, never null); a destination not listed gets
///   no rows from it. Sparse, so that a rank among 1,024 that sends to a few of 256 experts
///   costs a few entries, not 256 (#19 item 6).
/// - whole (`whole` non-null; `dests` and `parts` empty): every row of the source in one
///   batch, in the source's order, row i for destination `row_dest[i]`. Made only for a rule
///   that takes it (CollectiveRule::takes_whole_rows: concatenation), which splits the rows
///   while it concatenates them: the source neither groups nor copies its rows into a batch
///   per destination, and no batch is allocated per part (at 1,024 ranks a combine part is
///   about one row; #19 item 6). `split_whole` makes the split form of the same rows.
/// Built by one stage actor, then read-only (shared with the collective).
struct Contribution {
  int64_t iteration = 0;
  int32_t source = 0;          ///< contributor index (DP rank for dispatch, expert for combine)
  std::vector<int32_t> dests;  ///< ascending destination slots
  /// [dests.size()], non-null until a point-to-point sender moves them out (a contribution
  /// handed to a collective is shared and never moved from).
  std::vector<engine::dataflow::TokenBatchPtr> parts;
  /// Whole form: all rows (null in the split form).
  engine::dataflow::TokenBatchPtr whole;
  /// Whole form: [whole->num_tokens()] each row's destination slot.
  std::vector<int32_t> row_dest;

  bool is_whole() const { return whole != nullptr; }
  /// The part for destination `dst`, or null when this source sends it nothing (split form).
  engine::dataflow::TokenBatchPtr part(int32_t dst) const {
    MUFLOW_ASSERT(!is_whole(), "Contribution::part of a whole contribution (split_whole first)");
    const auto it = std::lower_bound(dests.begin(), dests.end(), dst);
    return it != dests.end() && *it == dst ? parts[static_cast<size_t>(it - dests.begin())]
                                           : nullptr;
  }
  /// The parts as one vector indexed by destination ([num_dests], null where nothing).
  std::vector<engine::dataflow::TokenBatchPtr> dense_parts(size_t num_dests) const {
    MUFLOW_ASSERT(!is_whole(), "Contribution::dense_parts of a whole contribution");
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

/// The split form of whole contribution `c` (its rows grouped by destination, each part's
/// rows in `c`'s order; a split contribution is returned as it is): for a collective replica
/// that forwards contributions to another process, whose codec carries the split form.
/// `layer_of(dst)` is the LayerId of destination `dst`'s part and `payload` the parts' payload
/// (a whole combine contribution of the sim is the expert's input batch, whose own payload is
/// kExpertInputs). Errors: InvalidArgument for a
/// `row_dest` of the wrong length or naming a destination outside [0, num_dests), or for
/// activations that do not match the rows.
template <typename LayerOf>
absl::StatusOr<ContributionPtr> split_whole(const ContributionPtr& c, size_t num_dests,
                                            LayerOf&& layer_of, engine::dataflow::Payload payload) {
  if (!c->is_whole()) return c;
  const engine::dataflow::TokenBatch& all = *c->whole;
  const int64_t n = all.num_tokens();
  const int64_t width = all.act ? all.act->width : 0;
  if (static_cast<int64_t>(c->row_dest.size()) != n ||
      (width > 0 && static_cast<int64_t>(all.act->data.size()) != n * width)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "contribution of source %d: %d rows, %d destinations and %d activation floats of "
        "width %d",
        c->source, n, c->row_dest.size(), all.act ? all.act->data.size() : 0, width));
  }
  for (const int32_t d : c->row_dest) {
    if (d < 0 || static_cast<size_t>(d) >= num_dests) {
      return absl::InvalidArgumentError(
          absl::StrFormat("contribution of source %d: a row for destination %d of [0, %d)",
                          c->source, d, num_dests));
    }
  }
  ContributionPtr split = group_rows(
      c->iteration, c->source, num_dests, n,
      [&](int64_t i) { return c->row_dest[static_cast<size_t>(i)]; },
      [&](int32_t dst, int64_t rows) {
        return engine::dataflow::make_batch(layer_of(dst), payload, all.iteration, width, rows);
      },
      [&](engine::dataflow::TokenBatch& part, int64_t i) {
        part.tokens.push_back(all.tokens[static_cast<size_t>(i)]);
        if (width > 0) {
          const float* row = all.act->row(i);
          part.act->data.insert(part.act->data.end(), row, row + width);
        }
        ++part.act->num_rows;
      },
      thread_group_scratch());
  return split;
}

}  // namespace muflow::actors
