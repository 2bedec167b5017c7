#pragma once
/// \file
/// Which devices of one simulated run are running a stage at this instant of virtual time,
/// for kernel times that depend on what runs beside them: cpu devices on one host share its
/// DRAM bandwidth, so a weight-streaming expert run is slower while the host's other devices
/// run too (kernels/sim/measured_kernels.hpp, `expert_alone` rows; #19 item 3).
///
/// Ownership: one per run, shared by that run's SimExecutors. A stage actor sets its device
/// busy when it starts a run (granted, or on its own: actors/device_gate.hpp) and idle when
/// the run ends; the sim runs every actor on one thread (CAF's deterministic scheduler), so no
/// locking.

#include <cstddef>
#include <cstdint>
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
    for (int32_t n : node_) {
      MUFLOW_ASSERT(n >= 0 && static_cast<size_t>(n) < node_.size(),
                    "DeviceActivity: node index out of [0, devices)");
      ++node_size_[static_cast<size_t>(n)];
    }
  }

  /// Marks `device` as running a stage (true) or not; marking it twice counts it once.
  /// device in [0, devices) (asserted).
  void set_busy(int64_t device, bool busy) {
    const size_t d = checked(device);
    if (static_cast<bool>(busy_[d]) == busy) return;
    busy_[d] = busy;
    node_busy_[static_cast<size_t>(node_[d])] += busy ? 1 : -1;
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

  std::vector<int32_t> node_;
  std::vector<uint8_t> busy_;
  std::vector<int64_t> node_busy_;  ///< [node] busy devices
  std::vector<int64_t> node_size_;  ///< [node] devices
};

}  // namespace muflow::engine::exec
