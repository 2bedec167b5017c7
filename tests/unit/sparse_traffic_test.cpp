// The sparse all-to-all traffic the sim's collectives build (transport/sparse_traffic.hpp):
// merging, row-major order, and that the network's bound and orders give bit for bit what the
// dense matrix gives, on random matrices under both network models and mixed link speeds.

#include "transport/sparse_traffic.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <tuple>
#include <vector>

#include "engine/splitmix64.hpp"
#include "kernels/assert.hpp"
#include "transport/all_to_all_order.hpp"
#include "transport/aurora_order.hpp"
#include "transport/big_switch_network.hpp"
#include "transport/sim_network_channel.hpp"

namespace muflow::transport {
namespace {

TEST(SparseTrafficTest, BuilderMergesPairsDropsDiagonalAndZerosInRowMajorOrder) {
  TrafficBuilder b(4);
  b.add(2, 1, 5);
  b.add(0, 3, 7);
  b.add(2, 1, 6);  // same pair: summed
  b.add(1, 1, 9);  // in-device: dropped
  b.add(3, 0, 0);  // nothing: dropped
  b.add(0, 1, 1);
  const SparseTraffic t = b.build();
  EXPECT_EQ(t.num_devices, 4);
  ASSERT_EQ(t.entries.size(), 3u);
  EXPECT_EQ(t.entries[0].src, 0);
  EXPECT_EQ(t.entries[0].dst, 1);
  EXPECT_EQ(t.entries[0].bytes, 1);
  EXPECT_EQ(t.entries[1].src, 0);
  EXPECT_EQ(t.entries[1].dst, 3);
  EXPECT_EQ(t.entries[1].bytes, 7);
  EXPECT_EQ(t.entries[2].src, 2);
  EXPECT_EQ(t.entries[2].dst, 1);
  EXPECT_EQ(t.entries[2].bytes, 11);
}

TEST(SparseTrafficTest, WellFormedRejectsWhatTheBoundAndOrdersCannotRead) {
  TrafficBuilder b(3);
  b.add(0, 2, 4);
  b.add(1, 0, 2);
  const SparseTraffic ok = b.build();
  EXPECT_TRUE(well_formed(ok));
  EXPECT_TRUE(well_formed(SparseTraffic{}));  // no devices, no entries
  SparseTraffic bad = ok;
  std::swap(bad.entries[0], bad.entries[1]);  // not ascending
  EXPECT_FALSE(well_formed(bad));
  bad = ok;
  bad.entries.push_back(bad.entries.back());  // a pair twice
  EXPECT_FALSE(well_formed(bad));
  bad = ok;
  bad.entries[1].dst = 3;  // outside the network
  EXPECT_FALSE(well_formed(bad));
  bad = ok;
  bad.entries[0].dst = 0;  // in-device
  EXPECT_FALSE(well_formed(bad));
  bad = ok;
  bad.entries[0].bytes = 0;
  EXPECT_FALSE(well_formed(bad));
}

TEST(SparseTrafficTest, DenseRoundTrip) {
  const TrafficMatrix m = {{3, 0, 4}, {0, 0, 0}, {5, 6, 9}};
  const SparseTraffic s = sparse_traffic(m);
  EXPECT_EQ(s.entries.size(), 3u);  // diagonal left out
  TrafficMatrix off = m;
  for (size_t i = 0; i < off.size(); ++i) off[i][i] = 0;
  EXPECT_EQ(dense_traffic(s), off);
}

// Random traffic over 2 nodes with mixed link speeds: many zeros, a few large entries.
TrafficMatrix random_traffic(int n, uint64_t seed) {
  engine::SplitMix64 rng(seed);
  TrafficMatrix m(n, std::vector<int64_t>(n, 0));
  for (auto& row : m) {
    for (int64_t& b : row) {
      if (rng.uniform_int(0, 3) == 0) b = rng.uniform_int(1, 1 << 20);
    }
  }
  return m;
}

BigSwitchNetwork mixed_network(int n, NetworkModel model) {
  std::vector<DeviceLinks> devices;
  for (int d = 0; d < n; ++d) {
    const double bw = (d % 3 == 0 ? 50e9 : 12.5e9);
    devices.push_back({d < n / 2 ? 0 : 1, {bw, 2e-6}, {bw / 4, 5e-6}, {12e9, 10e-6}});
  }
  absl::StatusOr<BigSwitchNetwork> net = BigSwitchNetwork::create(std::move(devices), model);
  MUFLOW_ASSERT(net.ok(), "test network");
  return *std::move(net);
}

// The serial model's bound as the dense loops computed it before the sparse form (every
// pair, zeros included, i then j): the reference the sparse sums must equal bit for bit.
double dense_serial_bound(const BigSwitchNetwork& net, const TrafficMatrix& m) {
  const size_t n = m.size();
  std::vector<double> egress(n, 0.0), ingress(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const double s =
          net.transfer_seconds(static_cast<int32_t>(i), static_cast<int32_t>(j), m[i][j]);
      egress[i] += s;
      ingress[j] += s;
    }
  }
  double bound = 0.0;
  for (size_t i = 0; i < n; ++i) bound = std::max({bound, egress[i], ingress[i]});
  return bound;
}

// The fair-share bound as the dense loops computed it before the sparse form: per device and
// link class, bytes through its egress / ingress over the bandwidth plus the least latency.
double dense_fair_bound(const BigSwitchNetwork& net, const TrafficMatrix& m) {
  const size_t n = m.size();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<std::array<double, 4>> load(n, {0, 0, 0, 0});
  std::vector<std::array<double, 4>> lat(n, {kInf, kInf, kInf, kInf});
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j || m[i][j] == 0) continue;
      const auto a = static_cast<int32_t>(i), b = static_cast<int32_t>(j);
      const size_t k = net.same_node(a, b) ? 0 : 1;
      load[i][k] += static_cast<double>(m[i][j]);
      load[j][2 + k] += static_cast<double>(m[i][j]);
      lat[i][k] = std::min(lat[i][k], net.path(a, b).latency_s);
      lat[j][2 + k] = std::min(lat[j][2 + k], net.path(a, b).latency_s);
    }
  }
  double bound = 0.0;
  for (size_t d = 0; d < n; ++d) {
    const DeviceLinks& l = net.device(static_cast<int32_t>(d));
    for (size_t r = 0; r < 4; ++r) {
      if (load[d][r] == 0.0) continue;
      const double bw = (r % 2 == 0 ? l.intra_node : l.inter_node).bandwidth_bytes_per_s;
      bound = std::max(bound, load[d][r] / bw + lat[d][r]);
    }
  }
  return bound;
}

TEST(SparseTrafficTest, BoundAndOrdersEqualTheDenseOnesBitForBit) {
  for (NetworkModel model : {NetworkModel::kSerial, NetworkModel::kFairShare}) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      const int n = 12;
      const BigSwitchNetwork net = mixed_network(n, model);
      const TrafficMatrix dense = random_traffic(n, seed);
      TrafficBuilder b(n);
      // Added column-major and in two halves: the builder's order must not matter.
      for (int j = 0; j < n; ++j) {
        for (int i = 0; i < n; ++i) {
          b.add(i, j, dense[i][j] / 2);
          b.add(i, j, dense[i][j] - dense[i][j] / 2);
        }
      }
      const SparseTraffic sparse = b.build();
      EXPECT_EQ(dense_traffic(sparse), dense_traffic(sparse_traffic(dense)));
      EXPECT_EQ(port_load_lower_bound(net, sparse), model == NetworkModel::kSerial
                                                        ? dense_serial_bound(net, dense)
                                                        : dense_fair_bound(net, dense));
      EXPECT_EQ(port_load_lower_bound(net, sparse), port_load_lower_bound(net, dense));
      // Row-major: what a loop over the dense matrix meets, in that order.
      std::vector<Transfer> loop;
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          if (i != j && dense[i][j] > 0) loop.push_back({i, j, dense[i][j], 0.5});
        }
      }
      for (A2aOrder order :
           {A2aOrder::kRowMajor, A2aOrder::kRandom, A2aOrder::kSjf, A2aOrder::kAurora,
            A2aOrder::kAuroraChunked, A2aOrder::kAuroraUnsplit}) {
        // References from the dense loop's list: as is, Fisher-Yates with SplitMix64(seed),
        // sorted by (bytes, src, dst); Aurora's orders through their dense entry point.
        std::vector<Transfer> a = loop;
        if (order == A2aOrder::kRandom) {
          engine::SplitMix64 rng(seed);
          for (size_t k = a.size(); k > 1; --k) {
            const auto pick = static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(k) - 1));
            std::swap(a[k - 1], a[pick]);
          }
        } else if (order == A2aOrder::kSjf) {
          std::sort(a.begin(), a.end(), [](const Transfer& x, const Transfer& y) {
            return std::tie(x.bytes, x.src, x.dst) < std::tie(y.bytes, y.src, y.dst);
          });
        } else if (order != A2aOrder::kRowMajor) {
          a = order_all_to_all(order, net, dense, 0.5, seed);
        }
        const std::vector<Transfer> c = order_all_to_all(order, net, sparse, 0.5, seed);
        ASSERT_EQ(a.size(), c.size()) << a2a_order_name(order);
        for (size_t i = 0; i < a.size(); ++i) {
          EXPECT_EQ(a[i].src, c[i].src);
          EXPECT_EQ(a[i].dst, c[i].dst);
          EXPECT_EQ(a[i].bytes, c[i].bytes);
          EXPECT_EQ(a[i].ready_s, c[i].ready_s);
        }
      }
    }
  }
}

// The channel's per-entry finish time is the last of its pair's transfers, also when an
// order splits a pair into chunks (Aurora's preemptive order), and replaying the same order
// on a fresh network gives the same times.
TEST(SparseTrafficTest, ChannelEntryDoneIsTheLastTransferOfItsPair) {
  for (A2aOrder order : {A2aOrder::kRowMajor, A2aOrder::kAuroraChunked}) {
    const int n = 6;
    const TrafficMatrix dense = random_traffic(n, 11);
    const SparseTraffic sparse = sparse_traffic(dense);
    auto net = std::make_shared<BigSwitchNetwork>(mixed_network(n, NetworkModel::kSerial));
    SimNetworkChannel channel(net, order, 3);
    const AllToAllTiming t = channel.all_to_all(sparse, 0.25, 9);
    ASSERT_EQ(t.entry_done_s.size(), sparse.entries.size());
    // The same transfers on a fresh network: each entry's last finish.
    BigSwitchNetwork fresh = mixed_network(n, NetworkModel::kSerial);
    const std::vector<Transfer> transfers =
        order_all_to_all(order, fresh, sparse, 0.25, engine::splitmix64_mix(3 ^ 9));
    const std::vector<double> finish = fresh.schedule_all(transfers);
    std::vector<std::vector<double>> last(n, std::vector<double>(n, 0.25));
    size_t chunks = 0;
    for (size_t i = 0; i < transfers.size(); ++i) {
      double& l = last[transfers[i].src][transfers[i].dst];
      l = std::max(l, finish[i]);
      ++chunks;
    }
    if (order == A2aOrder::kAuroraChunked) EXPECT_GE(chunks, sparse.entries.size());
    double end = 0.25;
    for (size_t e = 0; e < sparse.entries.size(); ++e) {
      EXPECT_EQ(t.entry_done_s[e], last[sparse.entries[e].src][sparse.entries[e].dst]);
      EXPECT_GT(t.entry_done_s[e], 0.25);
      end = std::max(end, t.entry_done_s[e]);
    }
    EXPECT_EQ(t.end_s, end);
    EXPECT_EQ(t.bound_s, port_load_lower_bound(fresh, sparse));
  }
}

}  // namespace
}  // namespace muflow::transport
