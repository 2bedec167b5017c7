#pragma once
/// \file
/// The sim backend's big-switch network (ARCHITECTURE.md §4; Aurora §2.4 and Fig. 4(a)):
/// a non-blocking fabric where transfers contend only at the devices' ports, under one of
/// two models (`NetworkModel`): ports that serve one transfer at a time, in the order given,
/// so transmission order matters (Aurora §4.2); or max-min fair sharing between concurrent
/// flows (fair_share.hpp). A separate PCIe port per device and direction carries
/// host<->device copies (HarMoEny §4.3 expert fetches), one copy at a time in both models.
/// Plain C++, no CAF, deterministic: the same calls give bit-identical times.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/assert.hpp"
#include "transport/fair_share.hpp"
#include "transport/link_model.hpp"

namespace muflow::transport {

/// How concurrent transfers share a device's fabric ports (`[network] model`).
enum class NetworkModel {
  /// One transfer per port at a time, list-scheduled in the order handed in (Aurora §2.4's
  /// contention model): a transfer holds its source's egress and its destination's ingress
  /// for latency + bytes / min(bw(src), bw(dst)). Intra- and inter-node traffic of a device
  /// share its one egress and one ingress port.
  kSerial,
  /// Max-min fair sharing (fair_share.hpp): transfers run concurrently from their ready
  /// time; a device's egress and ingress are separate resources per link class (NVLink
  /// inside the node, the NIC across nodes), each with the class's bandwidth; a transfer
  /// finishes its path latency after its last byte. The order of the transfers of one call
  /// does not change their times (only ties); transfers of later calls get the capacity
  /// earlier ones left (arrival times are promised at send).
  kFairShare,
};

/// "serial" or "fair-share". Errors: InvalidArgument naming the accepted values.
absl::StatusOr<NetworkModel> parse_network_model(std::string_view name);
/// The name `parse_network_model` accepts for `model`.
std::string_view network_model_name(NetworkModel model);

/// Where one device sits and the links it has.
struct DeviceLinks {
  int32_t node = 0;      ///< node index >= 0; devices with the same node talk over `intra_node`
  LinkClass intra_node;  ///< this device's NVLink/NVSwitch share (or PCIe P2P), per direction
  LinkClass inter_node;  ///< this device's NIC share for traffic to other nodes, per direction
  LinkClass host;        ///< this device's PCIe link to host memory, per direction
};

/// One device-to-device transfer: `bytes` (>= 0) from device `src` to device `dst`, which
/// may start no earlier than `ready_s` (virtual seconds).
struct Transfer {
  int32_t src = 0;
  int32_t dst = 0;
  int64_t bytes = 0;
  double ready_s = 0.0;
};

/// The big switch with port occupancy. Timing model under `NetworkModel::kSerial`, for a
/// transfer t served after every transfer handed in before it:
///   - src == dst, or bytes == 0: moves nothing over the fabric (in-device handoff, or a part
///     a collective does not send); finishes at its ready time and occupies no port;
///   - otherwise it holds egress(src) and ingress(dst) exclusively from
///       start = max(ready, egress(src) free, ingress(dst) free)
///     for latency + bytes / min(bw(src), bw(dst)), where bw and latency come from both
///     devices' `intra_node` class when they share a node and `inter_node` otherwise, and
///     the latency is the larger of the two devices'.
/// Ports are not backfilled: a later transfer never uses an idle gap before an earlier
/// transfer's start (list scheduling in the given order). Intra- and inter-node traffic of
/// a device share its one egress and one ingress port (Aurora's big switch); the PCIe host
/// ports are separate and never block the fabric ports. Under `NetworkModel::kFairShare`
/// see that enumerator; the zero-byte and same-device rule is the same.
///
/// Value type; not thread-safe: owned by one actor (the sim backend's network owner) or
/// test. Device indices and byte counts come from the engine and are checked with
/// MUFLOW_ASSERT; link classes come from users and are checked by `create`.
class BigSwitchNetwork {
 public:
  /// Network over `devices` (index = device id) under `model`, all ports idle from time 0.
  /// Errors: InvalidArgument when `devices` is empty, a node index is negative, or a link
  /// class is invalid (see `validate_link_class`), naming the device and the class.
  static absl::StatusOr<BigSwitchNetwork> create(std::vector<DeviceLinks> devices,
                                                 NetworkModel model = NetworkModel::kSerial);

  /// `num_devices` identical devices, `devices_per_node` per node (device d on node
  /// d / devices_per_node). Errors: InvalidArgument when a count is < 1 or a class invalid.
  static absl::StatusOr<BigSwitchNetwork> uniform(int32_t num_devices, int32_t devices_per_node,
                                                  LinkClass intra_node, LinkClass inter_node,
                                                  LinkClass host,
                                                  NetworkModel model = NetworkModel::kSerial);

  NetworkModel model() const { return model_; }
  int32_t num_devices() const { return static_cast<int32_t>(devices_.size()); }
  /// Device `d`'s links; aborts when `d` is outside [0, num_devices()). Inline: the network
  /// model asks for every transfer's two ends (#19 item 6).
  const DeviceLinks& device(int32_t d) const {
    check_device(d);
    return devices_[static_cast<size_t>(d)];
  }
  bool same_node(int32_t a, int32_t b) const;

  /// The path from `src` to `dst` as one link: min of the two bandwidths, max of the two
  /// latencies, over `intra_node` when they share a node and `inter_node` otherwise.
  LinkClass path(int32_t src, int32_t dst) const;

  /// Seconds the two ports are held to move `bytes` from `src` to `dst`: 0 when
  /// src == dst or bytes == 0, else path latency + bytes / path bandwidth.
  double transfer_seconds(int32_t src, int32_t dst, int64_t bytes) const;

  /// Finish times (seconds) of `ordered`, served in that order (kSerial; kFairShare: sharing
  /// the ports) after the transfers already scheduled on this network, none starting before
  /// `now_s`. Pure: port occupancy is read, not changed. Result [ordered.size()], element i
  /// for ordered[i].
  std::vector<double> finish_times(const std::vector<Transfer>& ordered, double now_s) const;

  /// Serves `transfer` after everything scheduled so far and returns its finish time
  /// (seconds); the ports it uses stay busy until then.
  double schedule(const Transfer& transfer);

  /// Schedules `ordered` as one call; finish times [ordered.size()]. kSerial: `schedule` for
  /// each in order. kFairShare: they share the ports max-min fairly among themselves.
  std::vector<double> schedule_all(const std::vector<Transfer>& ordered);

  /// Copies `bytes` from host memory to `device` over its host link, serialized with the
  /// device's earlier host-to-device copies, starting no earlier than `ready_s`; returns
  /// the finish time. Does not touch the fabric ports. bytes == 0 finishes at ready_s.
  double host_to_device(int32_t device, int64_t bytes, double ready_s);

  /// As `host_to_device`, the other direction (PCIe is full duplex: a separate port).
  double device_to_host(int32_t device, int64_t bytes, double ready_s);

  /// Time (seconds) from which each port is idle for good, given what was scheduled
  /// (kSerial; kFairShare tracks per-flow rates instead and reports 0).
  double egress_free_s(int32_t device) const;
  double ingress_free_s(int32_t device) const;
  double host_to_device_free_s(int32_t device) const;
  double device_to_host_free_s(int32_t device) const;

  /// Forgets every scheduled transfer and copy: all ports idle from time 0.
  void reset();

 private:
  BigSwitchNetwork(std::vector<DeviceLinks> devices, NetworkModel model);

  void check_device(int32_t d) const {
    MUFLOW_ASSERT(d >= 0 && d < num_devices(), "device index outside the network");
  }
  /// kFairShare: the flow of `t` (bytes > 0, src != dst) with ready time >= `floor_s`.
  FairShareFlow fair_share_flow(const Transfer& t, double floor_s) const;
  /// kFairShare: finish times of `ordered` on `fair_`, committed to `commit_to` (this
  /// network's `fair_`) when not null, else pure.
  std::vector<double> fair_share_finish(const std::vector<Transfer>& ordered, double floor_s,
                                        FairShareLinks* commit_to) const;

  NetworkModel model_ = NetworkModel::kSerial;
  std::vector<DeviceLinks> devices_;
  std::vector<double> egress_free_;  ///< [num_devices] seconds
  std::vector<double> ingress_free_;
  std::vector<double> h2d_free_;
  std::vector<double> d2h_free_;
  /// kFairShare: resources 4·device + {0 egress intra-node, 1 egress inter-node, 2 ingress
  /// intra-node, 3 ingress inter-node}, capacities from the device's link classes.
  FairShareLinks fair_;
};

}  // namespace muflow::transport
