#pragma once
/// \file
/// Which devices of one simulated run are running a stage at this instant of virtual time,
/// for kernel times that depend on what runs beside them: cpu devices on one host share its
/// DRAM bandwidth, so a weight-streaming expert run is slower while the host's other devices
/// run too (kernels/sim/measured_kernels.hpp, `expert_alone` rows; #19 item 3).
///
/// Shared runs (a fluid model of that sharing): a run whose contended work takes `alone_s`
/// with no other device of its node busy and `shared_s` with all of the calibration's
/// `others` busy progresses at rate alone_s / (alone_s + σ·(shared_s − alone_s)) (in
/// alone-seconds per second) while a share σ = min(1, busy peers / others) of them is busy,
/// the interpolation of the measured rows; then its `fixed_s` rest. Each time a device of the
/// node starts or ends a run, every other shared run there is advanced to that instant at its
/// old rate and its end projected again at the new one (event-driven, as a flow-level network
/// model recomputes rates when a flow starts or ends); its owner is told the new end through
/// its `reschedule` callback, with a new generation so that the finish message sent for an
/// earlier projection is recognized as stale. Two runs that overlap thus both slow down while
/// they overlap, whichever started first (charging a run by the occupancy at its start made
/// the first of two simultaneous runs an "alone" one and the second a "shared" one).
///
/// Ownership: one per run, shared by that run's SimExecutors. A stage actor sets its device
/// busy when it starts a run (granted, or on its own: actors/device_gate.hpp) and idle when
/// the run ends; the sim runs every actor on one thread (CAF's deterministic scheduler), so no
/// locking.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "kernels/assert.hpp"

namespace muflow::engine::exec {

/// Busy flags of one run's devices and the count of busy devices per node.
class DeviceActivity {
 public:
  /// `node_of_device[d]`: the host (node index) device d sits on, dense indices in
  /// [0, devices) (SimSetup's node numbering); devices of one node share its memory.
  explicit DeviceActivity(std::vector<int32_t> node_of_device)
      : node_(std::move(node_of_device)), busy_(node_.size(), 0) {
    node_busy_.assign(node_.size(), 0);
    node_size_.assign(node_.size(), 0);
    members_.resize(node_.size());
    node_shared_.assign(node_.size(), 0);
    runs_.resize(node_.size());
    for (size_t d = 0; d < node_.size(); ++d) {
      const int32_t n = node_[d];
      MUFLOW_ASSERT(n >= 0 && static_cast<size_t>(n) < node_.size(),
                    "DeviceActivity: node index out of [0, devices)");
      ++node_size_[static_cast<size_t>(n)];
      members_[static_cast<size_t>(n)].push_back(d);
    }
  }

  /// A shared run's contended work (see the file comment): seconds alone and with every one of
  /// `others` peers busy (others ≥ 1), and what a run charged at its start was charged for it.
  struct SharedWork {
    double alone_s = 0.0, shared_s = 0.0, charged_s = 0.0;
    int64_t others = 0;
    /// Scales the work's three times by `f` >= 0 (the same run made longer or shorter).
    void scale(double f) {
      alone_s *= f;
      shared_s *= f;
      charged_s *= f;
    }
  };
  /// Tells a shared run's owner its new end: seconds from now, and the run's generation.
  using Reschedule = std::function<void(double delay_s, uint64_t generation)>;

  /// Marks `device` as running a stage (true) or not; marking it twice counts it once.
  /// device in [0, devices) (asserted). Shared runs are not advanced (see the overload).
  void set_busy(int64_t device, bool busy) {
    const size_t d = checked(device);
    if (static_cast<bool>(busy_[d]) == busy) return;
    busy_[d] = busy;
    node_busy_[static_cast<size_t>(node_[d])] += busy ? 1 : -1;
  }
  /// As set_busy, at virtual time `now_s` (non-decreasing over calls): the node's shared runs
  /// are advanced to now_s first, and every other shared run of the node whose peers changed
  /// gets its new end (Reschedule). A device going idle ends its own shared run.
  void set_busy(int64_t device, bool busy, double now_s) {
    const size_t d = checked(device);
    if (static_cast<bool>(busy_[d]) == busy) return;
    const auto node = static_cast<size_t>(node_[d]);
    if (node_shared_[node] == 0) return set_busy(device, busy);
    advance_node(node, now_s);
    if (!busy && runs_[d].active) {
      runs_[d].active = false;
      runs_[d].reschedule = nullptr;  // (it holds its owner's handle)
      --node_shared_[node];
    }
    std::vector<double>& before = scratch_;
    before.clear();
    for (size_t p : members_[node]) before.push_back(runs_[p].active ? stretch(p) : 0.0);
    set_busy(device, busy);
    for (size_t i = 0; i < members_[node].size(); ++i) {
      const size_t p = members_[node][i];
      Run& r = runs_[p];
      // (A run in its fixed rest, or whose share stayed capped, keeps its end.)
      if (p == d || !r.active || r.left_alone_s <= 0 || stretch(p) == before[i]) continue;
      r.reschedule(remaining_s(p), ++r.generation);
    }
  }
  /// Starts `device`'s shared run at virtual time `now_s` (seconds): its contended work `w`
  /// (alone_s > 0, others ≥ 1), then `fixed_s` seconds (negative counts as 0). Returns the
  /// seconds from now_s to its projected end and its generation (≥ 1); later moves come
  /// through `reschedule`, called from set_busy on the sim's one thread. Aborts
  /// (MUFLOW_ASSERT) unless the device is busy and has no active shared run, and w is as
  /// stated.
  std::pair<double, uint64_t> start_shared(int64_t device, double now_s, const SharedWork& w,
                                           double fixed_s, Reschedule reschedule) {
    const size_t d = checked(device);
    MUFLOW_ASSERT(busy_[d] && !runs_[d].active && w.alone_s > 0 && w.others >= 1,
                  "DeviceActivity::start_shared: a busy device without a shared run, positive "
                  "work and at least one calibrated peer");
    const auto node = static_cast<size_t>(node_[d]);
    advance_node(node, now_s);  // (its runs' clocks to now_s; nothing of theirs changes)
    Run& r = runs_[d];
    r.active = true;
    r.alone_s = w.alone_s;
    r.shared_s = w.shared_s;
    r.others = w.others;
    r.left_alone_s = w.alone_s;
    r.fixed_left_s = std::max(0.0, fixed_s);
    r.last_s = now_s;
    r.reschedule = std::move(reschedule);
    ++node_shared_[node];
    return {remaining_s(d), ++r.generation};
  }
  /// Whether `generation` is `device`'s active shared run's latest (its finish message is due).
  bool current(int64_t device, uint64_t generation) const {
    const Run& r = runs_[checked(device)];
    return r.active && r.generation == generation;
  }
  /// Devices other than `device` on its node that are running a stage now. O(1).
  int64_t busy_peers(int64_t device) const {
    const size_t d = checked(device);
    return node_busy_[static_cast<size_t>(node_[d])] - busy_[d];
  }
  /// Devices on `device`'s node, itself included.
  int64_t node_size(int64_t device) const {
    return node_size_[static_cast<size_t>(node_[checked(device)])];
  }

 private:
  size_t checked(int64_t device) const {
    MUFLOW_ASSERT(device >= 0 && static_cast<size_t>(device) < node_.size(),
                  "DeviceActivity: device index out of range");
    return static_cast<size_t>(device);
  }

  struct Run {
    bool active = false;
    double alone_s = 0, shared_s = 0;
    int64_t others = 1;
    double left_alone_s = 0;  ///< contended work left, in seconds at the alone rate
    double fixed_left_s = 0;  ///< the rest after it
    double last_s = 0;        ///< when the two above were brought up to date
    uint64_t generation = 0;
    Reschedule reschedule;
  };

  // Seconds of contended work per alone-second at device d's present share of busy peers.
  double stretch(size_t d) const {
    const Run& r = runs_[d];
    const double share = std::min(1.0, static_cast<double>(busy_peers(static_cast<int64_t>(d))) /
                                           static_cast<double>(r.others));
    return (r.alone_s + share * (r.shared_s - r.alone_s)) / r.alone_s;
  }
  double remaining_s(size_t d) const {
    return runs_[d].left_alone_s * stretch(d) + runs_[d].fixed_left_s;
  }
  // Every active shared run of `node` progressed to now_s at its present rate.
  void advance_node(size_t node, double now_s) {
    for (size_t p : members_[node]) {
      Run& r = runs_[p];
      if (!r.active) continue;
      double dt = std::max(0.0, now_s - r.last_s);
      r.last_s = now_s;
      const double contended_s = r.left_alone_s * stretch(p);
      if (dt < contended_s) {
        r.left_alone_s -= dt / stretch(p);
        continue;
      }
      dt -= contended_s;
      r.left_alone_s = 0;
      r.fixed_left_s = std::max(0.0, r.fixed_left_s - dt);
    }
  }

  std::vector<int32_t> node_;
  std::vector<uint8_t> busy_;
  std::vector<int64_t> node_busy_;  ///< [node] busy devices
  std::vector<int64_t> node_size_;  ///< [node] devices
  std::vector<std::vector<size_t>> members_;  ///< [node] its devices
  std::vector<int64_t> node_shared_;          ///< [node] active shared runs
  std::vector<Run> runs_;                     ///< [device] its shared run
  std::vector<double> scratch_;               ///< set_busy's stretches before the change
};

}  // namespace muflow::engine::exec
