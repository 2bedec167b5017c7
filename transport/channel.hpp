#pragma once
/// \file
/// The channel token batches take between devices (ARCHITECTURE.md §4): what an edge of a
/// wiring graph costs in time. The actors decide where a batch goes; the channel says when it
/// arrives. In one process on real hardware the handoff is immediate (InProcessChannel); the
/// sim backend's channel carries it over the big-switch network in virtual time
/// (sim_network_channel.hpp); UCX (between processes) and NCCL (between GPUs) come next.

#include <cstdint>
#include <utility>
#include <vector>

#include "transport/all_to_all_order.hpp"

namespace muflow::transport {

/// When the transfers of one barrier all-to-all finish.
struct AllToAllTiming {
  /// [traffic.entries.size()] when the last transfer of each entry's device pair finished
  /// (seconds since the run's start, >= start_s), in the traffic's entry order.
  std::vector<double> entry_done_s;
  double bound_s = 0.0;  ///< its port-load lower bound (Aurora's b_max), seconds
  double end_s = 0.0;    ///< when the last transfer finished (>= start_s)
};

/// Carries token batches between devices. Owned by one run (RunContext); called from the
/// run's actors; implementations document their thread safety.
class Channel {
 public:
  virtual ~Channel() = default;
  /// True when transfers take modeled time (the sender schedules the delivery for the
  /// returned arrival time in virtual time); false when delivery is immediate.
  virtual bool timed() const = 0;
  /// Arrival time (seconds since the run's start) of `bytes` sent from device `from` to
  /// device `to` (different devices) at `now_s`.
  virtual double transfer(int32_t from, int32_t to, int64_t bytes, double now_s) = 0;
  /// Arrival times [sends.size()] of several sends from device `from` at `now_s`, handed in
  /// together (`sends[i]` = {to, bytes}, to != from): under a fair-share network they share
  /// the ports as one call. Default: `transfer` for each, in order.
  virtual std::vector<double> transfers(int32_t from,
                                        const std::vector<std::pair<int32_t, int64_t>>& sends,
                                        double now_s) {
    std::vector<double> out;
    out.reserve(sends.size());
    for (const auto& [to, bytes] : sends) out.push_back(transfer(from, to, bytes, now_s));
    return out;
  }
  /// One barrier all-to-all of `traffic` (bytes per device pair) ready at `start_s`;
  /// `order_key` distinguishes all-to-alls for orders that draw at random.
  virtual AllToAllTiming all_to_all(const SparseTraffic& traffic, double start_s,
                                    uint64_t order_key) = 0;
};

/// Devices in one process on real hardware: a batch is handed over by handle, at once.
/// Stateless; any thread.
class InProcessChannel final : public Channel {
 public:
  bool timed() const override { return false; }
  double transfer(int32_t, int32_t, int64_t, double now_s) override { return now_s; }
  AllToAllTiming all_to_all(const SparseTraffic& traffic, double start_s, uint64_t) override {
    AllToAllTiming t;
    t.entry_done_s.assign(traffic.entries.size(), start_s);
    t.end_s = start_s;
    return t;
  }
};

}  // namespace muflow::transport
