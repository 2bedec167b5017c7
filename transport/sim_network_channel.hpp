#pragma once
/// \file
/// The sim backend's channel: transfers cross the big-switch network (big_switch_network.hpp)
/// in virtual time; a barrier all-to-all's transfers are served in the topology's
/// `[network] a2a_order` (Aurora §4, aurora_order.hpp).

#include <cstdint>
#include <memory>

#include "transport/aurora_order.hpp"
#include "transport/big_switch_network.hpp"
#include "transport/channel.hpp"

namespace muflow::transport {

/// Not thread-safe: used by the actors of one single-threaded virtual-time run (several runs
/// colocated on one cluster share `network`, each with its own channel).
class SimNetworkChannel final : public Channel {
 public:
  /// `order`: how each all-to-all's transfers are served; `seed` is mixed with the order key
  /// of each all-to-all (the random order).
  SimNetworkChannel(std::shared_ptr<BigSwitchNetwork> network, A2aOrder order, uint64_t seed)
      : network_(std::move(network)), order_(order), seed_(seed) {}

  bool timed() const override { return true; }
  double transfer(int32_t from, int32_t to, int64_t bytes, double now_s) override;
  std::vector<double> transfers(int32_t from, const std::vector<std::pair<int32_t, int64_t>>& sends,
                                double now_s) override;
  AllToAllTiming all_to_all(const SparseTraffic& traffic, double start_s,
                            uint64_t order_key) override;
  /// The network's ports (to share them with a colocated run).
  const std::shared_ptr<BigSwitchNetwork>& network() const { return network_; }

 private:
  std::shared_ptr<BigSwitchNetwork> network_;
  A2aOrder order_;
  uint64_t seed_;
};

}  // namespace muflow::transport
