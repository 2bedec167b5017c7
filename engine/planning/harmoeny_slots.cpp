#include "engine/planning/harmoeny_slots.hpp"

#include <algorithm>
#include <set>

#include "absl/strings/str_format.h"

namespace muflow::engine::planning {

absl::StatusOr<SlotTimeline> plan_slot_timeline(std::vector<SlotWork> work, int64_t num_home,
                                                int64_t num_slots, double copy_s,
                                                bool prefetch) {
  if (num_home < 0 || num_slots < num_home) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "slot cache: %d slots cannot hold the device's %d home experts", num_slots, num_home));
  }
  if (!(copy_s >= 0)) {
    return absl::InvalidArgumentError(absl::StrFormat("slot cache: copy time %g s", copy_s));
  }
  std::set<int32_t> ids;
  std::vector<SlotWork> local, foreign;
  for (const SlotWork& w : work) {
    if (w.tokens < 1 || !(w.compute_s >= 0)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "slot cache: expert %d has %d tokens, %g s", w.expert, w.tokens, w.compute_s));
    }
    if (!ids.insert(w.expert).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("slot cache: expert %d listed twice", w.expert));
    }
    (w.local ? local : foreign).push_back(w);
  }
  if (static_cast<int64_t>(local.size()) > num_home) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "slot cache: %d local experts with tokens but %d home experts", local.size(), num_home));
  }
  if (!foreign.empty() && num_slots < 1) {
    return absl::InvalidArgumentError("slot cache: no slot to fetch a foreign expert into");
  }
  auto by_load = [](const SlotWork& a, const SlotWork& b) {
    return a.tokens != b.tokens ? a.tokens > b.tokens : a.expert < b.expert;
  };
  std::sort(local.begin(), local.end(), by_load);
  std::sort(foreign.begin(), foreign.end(), by_load);
  const size_t leaders = std::min<size_t>(2, local.size());

  // The slots a foreign expert may use, with the time each frees: spare slots (no home
  // expert) first, then slots of home experts with no tokens here (both free at 0), then the
  // leaders' slots (free when they finish). Ties go to the lower index, so spare slots are
  // used before a home expert has to be overwritten (and restored).
  struct Slot {
    double free_at = 0;
    bool home = false;
    bool overwritten = false;
    int32_t last_user = -1;  ///< position in t.order of the expert that used it last
  };
  std::vector<Slot> slots;
  for (int64_t i = num_home; i < num_slots; ++i) slots.push_back({0.0, false, false, -1});
  for (int64_t i = static_cast<int64_t>(local.size()); i < num_home; ++i) {
    slots.push_back({0.0, true, false, -1});
  }
  SlotTimeline t;
  double compute_free = 0, copy_free = 0;
  auto run = [&](const SlotWork& w, double ready) {
    const double start = std::max(compute_free, ready);
    t.stall_s += start - compute_free;
    compute_free = start + w.compute_s;
    t.order.push_back(w.expert);
    t.start_s.push_back(start);
    t.end_s.push_back(compute_free);
    t.slot.push_back(-1);
    t.slot_prev.push_back(-1);
    return compute_free;
  };
  for (size_t i = 0; i < leaders; ++i) {
    const double end = run(local[i], 0.0);
    slots.push_back({end, true, false, static_cast<int32_t>(t.order.size() - 1)});
  }
  // Slots of the other local experts are never lent (they are still needed).
  for (const SlotWork& w : foreign) {
    auto slot = std::min_element(slots.begin(), slots.end(), [](const Slot& a, const Slot& b) {
      return a.free_at < b.free_at;
    });
    // No prefetch: the copy starts when the compute stream reaches this expert.
    const double earliest = prefetch ? slot->free_at : std::max(slot->free_at, compute_free);
    const double copy_start = std::max(copy_free, earliest);
    copy_free = copy_start + copy_s;
    ++t.fetches;
    if (slot->home && !slot->overwritten) ++t.restores;
    slot->overwritten = true;
    slot->free_at = run(w, copy_free);
    t.slot.back() = static_cast<int32_t>(slot - slots.begin());
    t.slot_prev.back() = slot->last_user;
    slot->last_user = static_cast<int32_t>(t.order.size() - 1);
  }
  for (size_t i = leaders; i < local.size(); ++i) run(local[i], 0.0);
  t.makespan_s = compute_free;
  return t;
}

}  // namespace muflow::engine::planning
