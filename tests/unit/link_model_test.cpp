// The sim backend's network model (transport/): link presets, the big switch with ordered
// per-port service, PCIe host copies, Aurora's b_max and the baseline orders.

#include "transport/link_model.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engine/splitmix64.hpp"
#include "kernels/assert.hpp"
#include "transport/all_to_all_order.hpp"
#include "transport/big_switch_network.hpp"

namespace muflow::transport {
namespace {

using ::testing::HasSubstr;

// 1 byte per second and no latency: durations equal byte counts, exactly.
constexpr LinkClass kUnit{1.0, 0.0};

BigSwitchNetwork unit_network(int32_t num_devices) {
  absl::StatusOr<BigSwitchNetwork> net =
      BigSwitchNetwork::uniform(num_devices, num_devices, kUnit, kUnit, kUnit);
  MUFLOW_ASSERT(net.ok(), "unit network");
  return *std::move(net);
}

BigSwitchNetwork h100_node(int32_t num_devices) {
  absl::StatusOr<BigSwitchNetwork> net = BigSwitchNetwork::uniform(
      num_devices, 8, links::kNvlink4H100, links::kIb400G, links::kPcie5x16);
  MUFLOW_ASSERT(net.ok(), "h100 network");
  return *std::move(net);
}

double makespan_of(const BigSwitchNetwork& net, const std::vector<Transfer>& order) {
  return makespan(net.finish_times(order, 0.0), 0.0);
}

// Seed for the property tests: 20250101, or MUFLOW_TEST_SEED when set. Printed.
uint64_t test_seed() {
  const char* env = std::getenv("MUFLOW_TEST_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : 20250101;
  std::printf("link model seed %llu (override with MUFLOW_TEST_SEED)\n",
              static_cast<unsigned long long>(seed));
  return seed;
}

// ---------------------------------------------------------------------------------------
// Presets and validation

TEST(LinkModel, PresetsByNameAndPerDirectionBandwidths) {
  for (const std::string& name : link_class_names()) {
    absl::StatusOr<LinkClass> link = link_class_by_name(name);
    ASSERT_TRUE(link.ok()) << name;
    EXPECT_TRUE(validate_link_class(*link, name).ok()) << name;
  }
  // Datasheets quote NVLink bidirectionally; presets hold one direction.
  EXPECT_DOUBLE_EQ(link_class_by_name("nvlink4-h100")->bandwidth_bytes_per_s, 450e9);
  EXPECT_DOUBLE_EQ(link_class_by_name("nvlink3-a100")->bandwidth_bytes_per_s, 300e9);
  EXPECT_DOUBLE_EQ(link_class_by_name("nvlink2-v100")->bandwidth_bytes_per_s, 150e9);
  EXPECT_DOUBLE_EQ(link_class_by_name("ib-100g")->bandwidth_bytes_per_s, 100e9 / 8);
  EXPECT_LT(links::kPcie3x16.bandwidth_bytes_per_s, links::kPcie4x16.bandwidth_bytes_per_s);
  EXPECT_LT(links::kPcie4x16.bandwidth_bytes_per_s, links::kPcie5x16.bandwidth_bytes_per_s);

  absl::StatusOr<LinkClass> unknown = link_class_by_name("nvlink9");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("nvlink4-h100"));
}

TEST(LinkModel, CreateRejectsBadLinksAndNodes) {
  EXPECT_FALSE(BigSwitchNetwork::create({}).ok());
  EXPECT_FALSE(BigSwitchNetwork::uniform(0, 1, kUnit, kUnit, kUnit).ok());
  EXPECT_FALSE(BigSwitchNetwork::uniform(4, 0, kUnit, kUnit, kUnit).ok());

  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const LinkClass bad : {LinkClass{0.0, 0.0}, LinkClass{-1.0, 0.0}, LinkClass{nan, 0.0},
                              LinkClass{1.0, -1e-6}, LinkClass{1.0, nan}, LinkClass{1.0, inf}}) {
    absl::StatusOr<BigSwitchNetwork> net =
        BigSwitchNetwork::create({{0, kUnit, kUnit, kUnit}, {0, kUnit, kUnit, bad}});
    ASSERT_FALSE(net.ok());
    EXPECT_EQ(net.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(net.status().message()), HasSubstr("device 1 host"));
  }
  absl::StatusOr<BigSwitchNetwork> negative_node =
      BigSwitchNetwork::create({{-1, kUnit, kUnit, kUnit}});
  ASSERT_FALSE(negative_node.ok());
  EXPECT_THAT(std::string(negative_node.status().message()), HasSubstr("negative"));

  // Infinite bandwidth is an ideal link: only latency remains.
  absl::StatusOr<BigSwitchNetwork> ideal =
      BigSwitchNetwork::uniform(2, 2, LinkClass{inf, 1e-6}, kUnit, kUnit);
  ASSERT_TRUE(ideal.ok());
  EXPECT_DOUBLE_EQ(ideal->transfer_seconds(0, 1, int64_t{1} << 40), 1e-6);
}

// ---------------------------------------------------------------------------------------
// Single transfers, contention, mixed and hierarchical links

TEST(BigSwitch, SingleTransferIsLatencyPlusBytesOverBandwidth) {
  BigSwitchNetwork net = h100_node(8);
  const int64_t bytes = 64ll << 20;
  const double expected = links::kNvlink4H100.latency_s + static_cast<double>(bytes) / 450e9;
  EXPECT_DOUBLE_EQ(net.transfer_seconds(2, 5, bytes), expected);
  EXPECT_DOUBLE_EQ(net.finish_times({{2, 5, bytes, 0.0}}, 0.0)[0], expected);
  EXPECT_DOUBLE_EQ(net.finish_times({{2, 5, bytes, 1.0}}, 0.0)[0], 1.0 + expected);
  EXPECT_DOUBLE_EQ(net.finish_times({{2, 5, bytes, 0.0}}, 3.0)[0], 3.0 + expected);
  EXPECT_DOUBLE_EQ(net.schedule({2, 5, bytes, 0.5}), 0.5 + expected);
}

TEST(BigSwitch, SelfAndZeroByteTransfersAreFreeAndHoldNoPort) {
  BigSwitchNetwork net = h100_node(4);
  const std::vector<double> f =
      net.finish_times({{1, 1, 1 << 30, 0.25}, {0, 1, 0, 0.5}, {0, 1, 1000, 0.0}}, 0.0);
  EXPECT_DOUBLE_EQ(f[0], 0.25);  // in-device: nothing crosses the fabric
  EXPECT_DOUBLE_EQ(f[1], 0.5);   // zero bytes: nothing is sent
  EXPECT_DOUBLE_EQ(f[2], net.transfer_seconds(0, 1, 1000));  // ports were not taken
  EXPECT_DOUBLE_EQ(net.schedule({3, 3, 1 << 30, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(net.schedule({3, 2, 0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(net.egress_free_s(3), 0.0);
  EXPECT_DOUBLE_EQ(net.ingress_free_s(3), 0.0);
  EXPECT_DOUBLE_EQ(net.ingress_free_s(2), 0.0);
}

TEST(BigSwitch, SameDestinationSerializesDifferentDestinationsOverlap) {
  BigSwitchNetwork net = unit_network(4);
  // 0->2 and 1->2 share ingress(2): the second waits.
  EXPECT_EQ(net.finish_times({{0, 2, 5, 0.0}, {1, 2, 3, 0.0}}, 0.0),
            (std::vector<double>{5.0, 8.0}));
  // Same source, different destinations share egress(0): also serialize.
  EXPECT_EQ(net.finish_times({{0, 2, 5, 0.0}, {0, 3, 3, 0.0}}, 0.0),
            (std::vector<double>{5.0, 8.0}));
  // Disjoint ports overlap fully; a device may send and receive at once.
  EXPECT_EQ(net.finish_times({{0, 2, 5, 0.0}, {1, 3, 3, 0.0}, {2, 0, 4, 0.0}}, 0.0),
            (std::vector<double>{5.0, 3.0, 4.0}));
}

TEST(BigSwitch, LatencyIsPaidPerTransferWhileHoldingThePorts) {
  absl::StatusOr<BigSwitchNetwork> net =
      BigSwitchNetwork::uniform(3, 3, LinkClass{1.0, 0.5}, kUnit, kUnit);
  ASSERT_TRUE(net.ok());
  EXPECT_EQ(net->finish_times({{0, 2, 2, 0.0}, {1, 2, 2, 0.0}}, 0.0),
            (std::vector<double>{2.5, 5.0}));
}

TEST(BigSwitch, MixedBandwidthsUseTheSlowerPortAndTheLargerLatency) {
  // Aurora Theorem 5.2's heterogeneous setting: per-device bandwidths differ.
  absl::StatusOr<BigSwitchNetwork> net = BigSwitchNetwork::create({
      {0, LinkClass{100.0, 0.1}, kUnit, kUnit},
      {0, LinkClass{40.0, 0.2}, kUnit, kUnit},
      {0, LinkClass{100.0, 0.0}, kUnit, kUnit},
  });
  ASSERT_TRUE(net.ok());
  EXPECT_DOUBLE_EQ(net->transfer_seconds(0, 1, 400), 0.2 + 400.0 / 40.0);
  EXPECT_DOUBLE_EQ(net->transfer_seconds(1, 0, 400), 0.2 + 400.0 / 40.0);
  EXPECT_DOUBLE_EQ(net->transfer_seconds(0, 2, 400), 0.1 + 400.0 / 100.0);
  EXPECT_DOUBLE_EQ(net->path(2, 1).bandwidth_bytes_per_s, 40.0);
}

TEST(BigSwitch, InterNodeIsSlowerThanIntraNode) {
  BigSwitchNetwork net = h100_node(16);  // nodes {0..7}, {8..15}
  EXPECT_TRUE(net.same_node(0, 7));
  EXPECT_FALSE(net.same_node(7, 8));
  const int64_t bytes = 16ll << 20;
  const double intra = net.transfer_seconds(0, 7, bytes);
  const double inter = net.transfer_seconds(0, 8, bytes);
  EXPECT_DOUBLE_EQ(inter, links::kIb400G.latency_s + static_cast<double>(bytes) / 50e9);
  EXPECT_GT(inter, 5.0 * intra);
  // One egress port per device: intra- and inter-node sends of a device serialize.
  const std::vector<double> f = net.finish_times({{0, 8, bytes, 0.0}, {0, 1, bytes, 0.0}}, 0.0);
  EXPECT_DOUBLE_EQ(f[1], inter + net.transfer_seconds(0, 1, bytes));
}

// ---------------------------------------------------------------------------------------
// Order

// Hand-computed on a 1 byte/s, zero-latency switch (durations = bytes):
//   traffic 0->1: 4, 0->2: 4, 1->2: 3.
//   row-major 0->1 [0,4], 0->2 [4,8] (egress 0), 1->2 [8,11] (ingress 2)   -> 11
//   SJF       1->2 [0,3], 0->1 [0,4], 0->2 [4,8]                           ->  8 (= b_max)
// and the other way round, traffic 0->1: 3, 0->2: 2, 2->1: 4:
//   row-major 0->1 [0,3], 0->2 [3,5], 2->1 [3,7]                           ->  7 (= b_max)
//   SJF       0->2 [0,2], 0->1 [2,5], 2->1 [5,9] (ingress 1)               ->  9
TEST(AllToAllOrder, TransmissionOrderChangesTheMakespan) {
  BigSwitchNetwork net = unit_network(3);
  const TrafficMatrix a = {{0, 4, 4}, {0, 0, 3}, {0, 0, 0}};
  EXPECT_EQ(net.finish_times(order_row_major(a, 0.0), 0.0), (std::vector<double>{4, 8, 11}));
  EXPECT_EQ(net.finish_times(order_sjf(a, 0.0), 0.0), (std::vector<double>{3, 4, 8}));
  EXPECT_DOUBLE_EQ(all_to_all_lower_bound(a, {1.0, 1.0, 1.0}), 8.0);

  const TrafficMatrix b = {{0, 3, 2}, {0, 0, 0}, {0, 4, 0}};
  EXPECT_DOUBLE_EQ(makespan_of(net, order_row_major(b, 0.0)), 7.0);
  EXPECT_DOUBLE_EQ(makespan_of(net, order_sjf(b, 0.0)), 9.0);
  EXPECT_DOUBLE_EQ(all_to_all_lower_bound(b, {1.0, 1.0, 1.0}), 7.0);
}

// With all transfers ready together on idle ports, the makespan is the longest path in the
// chain "next transfer on the same port", and reversing the order reverses every chain: a
// list and its reverse always take equally long (so "SJF vs reversed SJF" cannot differ).
TEST(AllToAllOrder, ReversedOrderHasTheSameMakespan) {
  BigSwitchNetwork net = unit_network(3);
  const TrafficMatrix a = {{0, 4, 4}, {0, 0, 3}, {0, 0, 0}};
  std::vector<Transfer> order = order_row_major(a, 0.0);
  std::reverse(order.begin(), order.end());
  EXPECT_DOUBLE_EQ(makespan_of(net, order), 11.0);
  order = order_sjf(a, 0.0);
  std::reverse(order.begin(), order.end());
  EXPECT_DOUBLE_EQ(makespan_of(net, order), 8.0);
}

// Aurora Fig. 4(b)/(c): devices 0 and 1 each send one unit to 2 and to 3. Both first to 2
// takes 3 units; 0->2 with 1->3 then 0->3 with 1->2 takes b_max = 2.
TEST(AllToAllOrder, AuroraFigure4ContentionExample) {
  BigSwitchNetwork net = unit_network(4);
  EXPECT_DOUBLE_EQ(makespan_of(net, {{0, 2, 1, 0}, {1, 2, 1, 0}, {0, 3, 1, 0}, {1, 3, 1, 0}}), 3.0);
  EXPECT_DOUBLE_EQ(makespan_of(net, {{0, 2, 1, 0}, {1, 3, 1, 0}, {0, 3, 1, 0}, {1, 2, 1, 0}}), 2.0);
  const TrafficMatrix d = {{0, 0, 1, 1}, {0, 0, 1, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}};
  EXPECT_DOUBLE_EQ(all_to_all_lower_bound(d, {1.0, 1.0, 1.0, 1.0}), 2.0);
}

TEST(AllToAllOrder, ListsLeaveOutDiagonalAndZerosAndAreDeterministic) {
  const TrafficMatrix m = {{9, 3, 0}, {1, 9, 2}, {2, 5, 9}};
  const std::vector<Transfer> row = order_row_major(m, 0.5);
  ASSERT_EQ(row.size(), 5u);
  EXPECT_EQ(row[0].src, 0);
  EXPECT_EQ(row[0].dst, 1);
  EXPECT_EQ(row[0].bytes, 3);
  EXPECT_DOUBLE_EQ(row[0].ready_s, 0.5);
  const std::vector<Transfer> sjf = order_sjf(m, 0.0);
  std::vector<int64_t> sizes;
  for (const Transfer& t : sjf) {
    sizes.push_back(t.bytes);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{1, 2, 2, 3, 5}));
  EXPECT_EQ(sjf[1].src, 1);  // tie on 2 bytes broken by (src, dst): 1->2 before 2->0
  EXPECT_EQ(sjf[2].src, 2);

  auto key = [](const std::vector<Transfer>& v) {
    std::vector<int64_t> k;
    for (const Transfer& t : v) {
      k.push_back(t.src * 1000 + t.dst);
    }
    return k;
  };
  EXPECT_EQ(key(order_random(m, 7, 0.0)), key(order_random(m, 7, 0.0)));
  std::vector<int64_t> sorted = key(order_random(m, 7, 0.0));
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, key(row));  // a permutation of the row-major list
  bool some_seed_differs = false;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    some_seed_differs |= key(order_random(m, seed, 0.0)) != key(order_random(m, 7, 0.0));
  }
  EXPECT_TRUE(some_seed_differs);
}

// ---------------------------------------------------------------------------------------
// Lower bounds

TEST(AllToAllBound, HandMatricesIncludingZeroRowsAndMixedBandwidths) {
  EXPECT_DOUBLE_EQ(all_to_all_lower_bound({}, std::vector<double>{}), 0.0);
  EXPECT_DOUBLE_EQ(all_to_all_lower_bound({{0, 0}, {0, 0}}, {1.0, 1.0}), 0.0);
  // Diagonal ignored: only off-diagonal traffic crosses ports.
  EXPECT_DOUBLE_EQ(all_to_all_lower_bound({{100, 1}, {2, 100}}, {1.0, 1.0}), 2.0);
  // Row sums 6, 0, 3; column sums 2, 3, 4 (device 1 sends nothing).
  const TrafficMatrix m = {{0, 2, 4}, {0, 0, 0}, {2, 1, 0}};
  EXPECT_DOUBLE_EQ(all_to_all_lower_bound(m, {1.0, 1.0, 1.0}), 6.0);
  EXPECT_DOUBLE_EQ(all_to_all_lower_bound(m, {2.0, 1.0, 1.0}), 4.0);  // row 0 halves; col 2
  // Column bound with a slow receiver: column 1 sum 3 at 0.5 B/s.
  EXPECT_DOUBLE_EQ(all_to_all_lower_bound(m, {3.0, 3.0, 3.0}, {3.0, 0.5, 3.0}), 6.0);
  // Device 1 sends 5 to device 0: not its fast egress (2 B/s) but device 0's ingress limits.
  EXPECT_DOUBLE_EQ(all_to_all_lower_bound({{0, 0, 0}, {5, 0, 0}, {0, 0, 0}}, {1.0, 2.0, 1.0}), 5.0);

  // The model's own bound adds latency and the min-of-two-ports bandwidth.
  absl::StatusOr<BigSwitchNetwork> net = BigSwitchNetwork::create({
      {0, LinkClass{2.0, 0.5}, kUnit, kUnit},
      {0, LinkClass{1.0, 0.0}, kUnit, kUnit},
      {0, LinkClass{1.0, 0.0}, kUnit, kUnit},
  });
  ASSERT_TRUE(net.ok());
  // Egress 0: (0.5 + 2/1) + (0.5 + 4/1) = 7.
  EXPECT_DOUBLE_EQ(port_load_lower_bound(*net, m), 7.0);
}

// Property: every order's makespan is at least the model's port-load bound, which is at
// least Aurora's b_max; a reversed list takes as long as the list; the stateful and the
// pure paths agree. Random sparse matrices (zero rows and columns included), 2-8 devices,
// mixed per-device bandwidths, one node (b_max is stated for one big switch).
TEST(AllToAllBound, AnyOrderIsAtLeastTheLowerBound) {
  const uint64_t seed = test_seed();
  engine::SplitMix64 rng(seed);
  for (int c = 0; c < 1000; ++c) {
    const auto n = static_cast<int32_t>(rng.uniform_int(2, 8));
    std::vector<DeviceLinks> devices;
    std::vector<double> bw;
    for (int32_t d = 0; d < n; ++d) {
      const double b = static_cast<double>(rng.uniform_int(1, 4)) * 25e9;
      const double lat = rng.uniform01() < 0.5 ? 0.0 : 2e-6;
      devices.push_back({0, LinkClass{b, lat}, links::kIb100G, links::kPcie4x16});
      bw.push_back(b);
    }
    absl::StatusOr<BigSwitchNetwork> net = BigSwitchNetwork::create(devices);
    ASSERT_TRUE(net.ok());
    TrafficMatrix m(static_cast<size_t>(n), std::vector<int64_t>(static_cast<size_t>(n), 0));
    const double density = rng.uniform01();
    for (auto& row : m) {
      if (rng.uniform01() < 0.15) {
        continue;  // zero row
      }
      for (int64_t& v : row) {
        if (rng.uniform01() < density) {
          v = rng.uniform_int(0, 64ll << 20);
        }
      }
    }
    const double aurora = all_to_all_lower_bound(m, bw);
    const double ports = port_load_lower_bound(*net, m);
    ASSERT_GE(ports, aurora * (1 - 1e-12)) << "case " << c;
    for (std::vector<Transfer> order :
         {order_row_major(m, 0.0), order_sjf(m, 0.0), order_random(m, seed + c, 0.0)}) {
      const double span = makespan_of(*net, order);
      ASSERT_GE(span, ports * (1 - 1e-12)) << "case " << c;
      double total = 0.0;
      for (const Transfer& t : order) {
        total += net->transfer_seconds(t.src, t.dst, t.bytes);
      }
      ASSERT_LE(span, total * (1 + 1e-12)) << "case " << c;

      BigSwitchNetwork stateful = *net;
      EXPECT_EQ(stateful.schedule_all(order), net->finish_times(order, 0.0)) << "case " << c;

      std::reverse(order.begin(), order.end());
      ASSERT_NEAR(makespan_of(*net, order), span, 1e-12 * span) << "case " << c;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Stateful use and host copies

TEST(BigSwitch, StatefulScheduleKeepsPortsBusyAcrossCallsUntilReset) {
  BigSwitchNetwork net = unit_network(3);
  EXPECT_DOUBLE_EQ(net.schedule({0, 1, 10, 0.0}), 10.0);
  EXPECT_DOUBLE_EQ(net.egress_free_s(0), 10.0);
  EXPECT_DOUBLE_EQ(net.ingress_free_s(1), 10.0);
  // A later call waits for the earlier transfer's ports.
  EXPECT_DOUBLE_EQ(net.schedule({2, 1, 1, 3.0}), 11.0);
  // No backfilling: ingress 1 is busy until 11, so this waits although [0,3] was idle.
  EXPECT_DOUBLE_EQ(net.schedule({2, 1, 1, 0.0}), 12.0);
  // The pure query sees the occupancy but does not change it.
  EXPECT_EQ(net.finish_times({{0, 2, 1, 0.0}}, 0.0), (std::vector<double>{11.0}));
  EXPECT_EQ(net.finish_times({{0, 2, 1, 0.0}}, 20.0), (std::vector<double>{21.0}));
  EXPECT_DOUBLE_EQ(net.egress_free_s(0), 10.0);
  net.reset();
  EXPECT_DOUBLE_EQ(net.egress_free_s(0), 0.0);
  EXPECT_DOUBLE_EQ(net.ingress_free_s(1), 0.0);
  EXPECT_DOUBLE_EQ(net.schedule({2, 1, 1, 0.0}), 1.0);
}

TEST(BigSwitch, HostCopiesSerializePerDeviceAndDoNotBlockNvlink) {
  BigSwitchNetwork net = h100_node(2);
  const int64_t expert = 336ll << 20;  // one Mixtral-8x7B expert in bf16, roughly
  const double copy = links::kPcie5x16.latency_s + static_cast<double>(expert) / 50e9;
  EXPECT_DOUBLE_EQ(net.host_to_device(0, expert, 0.0), copy);
  EXPECT_DOUBLE_EQ(net.host_to_device(0, expert, 0.0), 2 * copy);  // serialized on device 0
  EXPECT_DOUBLE_EQ(net.host_to_device(1, expert, 0.0), copy);      // device 1's own link
  EXPECT_DOUBLE_EQ(net.device_to_host(0, expert, 0.0), copy);      // other PCIe direction
  EXPECT_DOUBLE_EQ(net.host_to_device(0, 0, 0.25), 0.25);
  EXPECT_DOUBLE_EQ(net.host_to_device_free_s(0), 2 * copy);
  // NVLink ports are untouched by the copies.
  EXPECT_DOUBLE_EQ(net.egress_free_s(0), 0.0);
  EXPECT_DOUBLE_EQ(net.ingress_free_s(0), 0.0);
  EXPECT_DOUBLE_EQ(net.schedule({1, 0, 1 << 20, 0.0}), net.transfer_seconds(1, 0, 1 << 20));
  // ...and transfers do not touch the host links.
  EXPECT_DOUBLE_EQ(net.host_to_device(0, expert, 0.0), 3 * copy);
  net.reset();
  EXPECT_DOUBLE_EQ(net.host_to_device(0, expert, 0.0), copy);
}

TEST(BigSwitch, SameCallsGiveBitIdenticalTimes) {
  const uint64_t seed = test_seed();
  auto run = [seed] {
    BigSwitchNetwork net = h100_node(16);
    engine::SplitMix64 rng(seed);
    std::vector<double> out;
    for (int k = 0; k < 2000; ++k) {
      const auto src = static_cast<int32_t>(rng.uniform_int(0, 15));
      const auto dst = static_cast<int32_t>(rng.uniform_int(0, 15));
      const double ready = rng.uniform01() * 1e-3;
      out.push_back(net.schedule({src, dst, rng.uniform_int(0, 1 << 24), ready}));
      if (k % 7 == 0) {
        out.push_back(net.host_to_device(src, rng.uniform_int(0, 1 << 26), ready));
      }
    }
    return out;
  };
  EXPECT_EQ(run(), run());
}

}  // namespace
}  // namespace muflow::transport
