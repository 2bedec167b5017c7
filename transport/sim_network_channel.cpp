#include "transport/sim_network_channel.hpp"

#include <algorithm>

#include "engine/splitmix64.hpp"
#include "kernels/assert.hpp"

namespace muflow::transport {

double SimNetworkChannel::transfer(int32_t from, int32_t to, int64_t bytes, double now_s) {
  return network_->schedule(Transfer{from, to, bytes, now_s});
}

std::vector<double> SimNetworkChannel::transfers(
    int32_t from, const std::vector<std::pair<int32_t, int64_t>>& sends, double now_s) {
  std::vector<Transfer> batch;
  batch.reserve(sends.size());
  for (const auto& [to, bytes] : sends) batch.push_back(Transfer{from, to, bytes, now_s});
  return network_->schedule_all(batch);
}

AllToAllTiming SimNetworkChannel::all_to_all(const SparseTraffic& traffic, double start_s,
                                             uint64_t order_key) {
  const uint64_t seed = engine::splitmix64_mix(seed_ ^ order_key);
  const std::vector<Transfer> order = order_all_to_all(order_, *network_, traffic, start_s, seed);
  const std::vector<double> finish = network_->schedule_all(order);
  AllToAllTiming t;
  t.entry_done_s.assign(traffic.entries.size(), start_s);
  const auto& entries = traffic.entries;
  for (size_t i = 0; i < order.size(); ++i) {
    // The entries are sorted by (src, dst); an order may split a pair into several transfers.
    // Row-major order (sync's default) is the entries' own: no search.
    const bool same =
        i < entries.size() && entries[i].src == order[i].src && entries[i].dst == order[i].dst;
    const auto it = same ? entries.begin() + static_cast<std::ptrdiff_t>(i)
                         : std::lower_bound(entries.begin(), entries.end(), order[i],
                                            [](const TrafficEntry& e, const Transfer& x) {
                                              return e.src != x.src ? e.src < x.src : e.dst < x.dst;
                                            });
    MUFLOW_ASSERT(it != entries.end() && it->src == order[i].src && it->dst == order[i].dst,
                  "all-to-all order moved a pair the traffic does not have");
    double& done = t.entry_done_s[static_cast<size_t>(it - entries.begin())];
    done = std::max(done, finish[i]);
  }
  t.bound_s = port_load_lower_bound(*network_, traffic);
  t.end_s = start_s;
  for (double f : finish) t.end_s = std::max(t.end_s, f);
  return t;
}

}  // namespace muflow::transport
