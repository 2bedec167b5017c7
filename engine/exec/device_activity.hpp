#pragma once
/// \file
/// Which devices of one simulated run are running a stage at this instant of virtual time,
/// for kernel times that depend on what runs beside them: cpu devices on one host share its
/// DRAM bandwidth, so a weight-streaming expert run is slower while the host's other devices
/// run too (kernels/sim/measured_kernels.hpp, `expert_alone` rows; #19 item 3).
///
/// Ownership: one per run, shared by that run's SimExecutors. The device actors set a
/// device busy when they grant one of its stages and idle when the stage reports done; the
/// sim runs every actor on one thread (CAF's deterministic scheduler), so no locking.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace muflow::engine::exec {

class DeviceActivity {
 public:
  /// `node_of_device[d]`: the host (node index, >= 0) device d sits on; devices of one node
  /// share its memory.
  explicit DeviceActivity(std::vector<int32_t> node_of_device) : node_(std::move(node_of_device)) {
    busy_.assign(node_.size(), 0);
    for (int32_t n : node_) {
      if (static_cast<size_t>(n) >= node_busy_.size()) node_busy_.resize(n + 1, 0);
      if (static_cast<size_t>(n) >= node_size_.size()) node_size_.resize(n + 1, 0);
      ++node_size_[static_cast<size_t>(n)];
    }
  }

  /// Marks `device` as running a stage (true) or not. device in [0, devices).
  void set_busy(int64_t device, bool busy) {
    const auto d = static_cast<size_t>(device);
    if (static_cast<bool>(busy_.at(d)) == busy) return;
    busy_[d] = busy;
    node_busy_[static_cast<size_t>(node_[d])] += busy ? 1 : -1;
  }
  /// Devices other than `device` on its node that are running a stage now. O(1).
  int64_t busy_peers(int64_t device) const {
    const auto d = static_cast<size_t>(device);
    return node_busy_[static_cast<size_t>(node_.at(d))] - busy_[d];
  }
  /// Devices on `device`'s node, itself included.
  int64_t node_size(int64_t device) const {
    return node_size_[static_cast<size_t>(node_.at(static_cast<size_t>(device)))];
  }

 private:
  std::vector<int32_t> node_;
  std::vector<uint8_t> busy_;
  std::vector<int64_t> node_busy_;  ///< [node] busy devices
  std::vector<int64_t> node_size_;  ///< [node] devices
};

}  // namespace muflow::engine::exec
