// Aurora's transmission orders on the big switch (transport/aurora_order.hpp): the
// preemptive order reaches the port-load bound, the unsplit Algorithm 1 order stays
// contention-free and close to it, and the engine's order selector.

#include "transport/aurora_order.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
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

// One node, device d's port at bw[d] bytes/s with `latency_s`.
BigSwitchNetwork mixed_network(const std::vector<double>& bw, double latency_s) {
  std::vector<DeviceLinks> devices;
  for (double b : bw) {
    devices.push_back({0, {b, latency_s}, {b, latency_s}, {b, latency_s}});
  }
  absl::StatusOr<BigSwitchNetwork> net = BigSwitchNetwork::create(std::move(devices));
  MUFLOW_ASSERT(net.ok(), "mixed network");
  return *std::move(net);
}

double makespan_of(const BigSwitchNetwork& net, const std::vector<Transfer>& order) {
  return makespan(net.finish_times(order, 0.0), 0.0);
}

// Seed for the property tests: 20250611, or MUFLOW_TEST_SEED when set. Printed.
uint64_t test_seed() {
  const char* env = std::getenv("MUFLOW_TEST_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : 20250611;
  std::printf("aurora order seed %llu (override with MUFLOW_TEST_SEED)\n",
              static_cast<unsigned long long>(seed));
  return seed;
}

// Chunks of `order` summed per pair equal `bytes` off the diagonal; no diagonal or empty
// chunk.
void expect_conserves(const TrafficMatrix& bytes, const std::vector<Transfer>& order,
                      const std::string& what) {
  const size_t n = bytes.size();
  std::vector<std::vector<int64_t>> sent(n, std::vector<int64_t>(n, 0));
  for (const Transfer& t : order) {
    ASSERT_NE(t.src, t.dst) << what;
    ASSERT_GT(t.bytes, 0) << what;
    ASSERT_TRUE(t.src >= 0 && t.dst >= 0 && static_cast<size_t>(t.src) < n &&
                static_cast<size_t>(t.dst) < n)
        << what;
    sent[static_cast<size_t>(t.src)][static_cast<size_t>(t.dst)] += t.bytes;
  }
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      ASSERT_EQ(sent[i][j], i == j ? 0 : bytes[i][j]) << what << " pair " << i << "->" << j;
    }
  }
}

// Serves `order` from idle ports and checks that no two chunks overlap on one egress or one
// ingress port (start = finish - holding time). Returns the makespan.
double served_without_conflict(const BigSwitchNetwork& net, const std::vector<Transfer>& order,
                               double scale_s, const std::string& what) {
  const std::vector<double> finish = net.finish_times(order, 0.0);
  std::map<std::pair<int, int32_t>, std::vector<std::pair<double, double>>> busy;
  for (size_t k = 0; k < order.size(); ++k) {
    const Transfer& t = order[k];
    const double start = finish[k] - net.transfer_seconds(t.src, t.dst, t.bytes);
    EXPECT_GE(start, -1e-12 * scale_s) << what;
    busy[{0, t.src}].push_back({start, finish[k]});
    busy[{1, t.dst}].push_back({start, finish[k]});
  }
  for (auto& [port, intervals] : busy) {
    std::sort(intervals.begin(), intervals.end());
    for (size_t k = 1; k < intervals.size(); ++k) {
      EXPECT_LE(intervals[k - 1].second, intervals[k].first + 1e-12 * scale_s)
          << what << (port.first == 0 ? " egress " : " ingress ") << port.second;
    }
  }
  return makespan(finish, 0.0);
}

// Random traffic of the kinds an MoE dispatch produces: dense, sparse, zero rows and
// columns, all zero, one hot pair. Entries up to `max_bytes`.
TrafficMatrix random_matrix(engine::SplitMix64& rng, int32_t n, int64_t max_bytes) {
  const auto size = static_cast<size_t>(n);
  TrafficMatrix m(size, std::vector<int64_t>(size, 0));
  const int64_t kind = rng.uniform_int(0, 5);
  for (size_t i = 0; i < size; ++i) {
    for (size_t j = 0; j < size; ++j) {
      const bool keep = kind == 1 ? rng.uniform_int(0, 3) == 0 : kind != 4;
      m[i][j] = keep ? rng.uniform_int(0, max_bytes) : 0;
    }
  }
  if (kind == 2) {  // a silent sender and a silent receiver
    const auto r = static_cast<size_t>(rng.uniform_int(0, n - 1));
    const auto c = static_cast<size_t>(rng.uniform_int(0, n - 1));
    for (size_t k = 0; k < size; ++k) {
      m[r][k] = 0;
      m[k][c] = 0;
    }
  }
  if (kind == 3) {  // one hot pair dwarfs the rest
    const auto r = static_cast<size_t>(rng.uniform_int(0, n - 1));
    const auto c = static_cast<size_t>(rng.uniform_int(0, n - 1));
    m[r][c] = max_bytes * 1000;
  }
  if (kind == 5) {  // tiny entries: rounding and many equal sizes
    for (auto& row : m) {
      for (int64_t& b : row) {
        b = rng.uniform_int(0, 3);
      }
    }
  }
  return m;
}

// Aurora §8's mixed cluster: 100, 80, 50 and 40 Gbps ports, in bytes/s.
const std::vector<double> kAuroraMix = {12.5e9, 10e9, 6.25e9, 5e9};

struct Case {
  BigSwitchNetwork net;
  TrafficMatrix bytes;
  bool uniform_bw;
  double min_bw;
  std::string what;
};

Case random_case(engine::SplitMix64& rng, int c) {
  const auto n = static_cast<int32_t>(rng.uniform_int(1, 12));
  const int64_t bw_kind = rng.uniform_int(0, 2);
  std::vector<double> bw(static_cast<size_t>(n), 1.0);
  int64_t max_bytes = 100;
  if (bw_kind == 1) {  // 400 Gb/s everywhere, MB-sized parts
    std::fill(bw.begin(), bw.end(), 50e9);
    max_bytes = 4 << 20;
  } else if (bw_kind == 2) {
    for (double& b : bw) {
      b = kAuroraMix[static_cast<size_t>(rng.uniform_int(0, 3))];
    }
    max_bytes = 4 << 20;
  }
  const bool uniform_bw = std::all_of(bw.begin(), bw.end(), [&](double b) { return b == bw[0]; });
  const double min_bw = *std::min_element(bw.begin(), bw.end());
  TrafficMatrix bytes = random_matrix(rng, n, max_bytes);
  return {mixed_network(bw, 0.0), std::move(bytes), uniform_bw, min_bw,
          "case " + std::to_string(c) + " n=" + std::to_string(n) + " bw kind " +
              std::to_string(bw_kind)};
}

// ---------------------------------------------------------------------------------------
// Preemptive order

// Property: over thousands of random matrices and bandwidth mixes with zero-latency links,
// the chunks carry exactly the matrix, never share a port, and finish exactly at the
// port-load bound (with uniform bandwidths also exactly at Aurora's b_max). With mixed
// bandwidths chunk boundaries are rounded to whole bytes, which may cost up to one byte's
// time per round; the worst relative excess seen is printed.
TEST(AuroraPreemptive, ReachesThePortLoadBoundOnRandomMatrices) {
  engine::SplitMix64 rng(test_seed());
  double worst_mixed_excess = 0.0;  // relative, bounds of at least 1 MB's time
  double worst_late_bytes = 0.0;    // (makespan - bound) in bytes at the slowest rate
  int64_t max_rounds = 0;
  for (int c = 0; c < 3000; ++c) {
    const Case k = random_case(rng, c);
    const auto n = static_cast<int64_t>(k.bytes.size());
    const OrderPlan plan = order_aurora_preemptive(k.net, k.bytes, 0.0);
    const double bound = port_load_lower_bound(k.net, k.bytes);
    expect_conserves(k.bytes, plan.transfers, k.what);
    const double span = served_without_conflict(k.net, plan.transfers, bound, k.what);
    EXPECT_EQ(plan.num_chunks, static_cast<int64_t>(plan.transfers.size())) << k.what;
    EXPECT_LE(plan.num_rounds, std::max<int64_t>(n * n, 1)) << k.what;
    EXPECT_DOUBLE_EQ(plan.predicted_s, span) << k.what;
    EXPECT_DOUBLE_EQ(plan.lower_bound_s, bound) << k.what;
    EXPECT_GE(span, bound * (1 - 1e-12)) << k.what;
    max_rounds = std::max(max_rounds, plan.num_rounds);
    if (k.uniform_bw) {
      EXPECT_LE(std::abs(span - bound), 1e-9 * bound) << k.what;
      const std::vector<double> bw(k.bytes.size(), k.min_bw);
      const double b_max = all_to_all_lower_bound(k.bytes, bw);
      EXPECT_LE(std::abs(span - b_max), 1e-9 * b_max) << k.what;
    } else {
      const double byte_slack = static_cast<double>(plan.num_rounds) / k.min_bw;
      EXPECT_LE(span, bound * (1 + 1e-9) + byte_slack) << k.what;
      worst_late_bytes = std::max(worst_late_bytes, (span - bound) * k.min_bw);
      if (bound * k.min_bw >= 1e6) {
        worst_mixed_excess = std::max(worst_mixed_excess, span / bound - 1);
      }
    }
  }
  std::printf(
      "preemptive: mixed bandwidths run late by at most %.3g bytes' time (relative %.3g when "
      "the bound is >= 1 MB's time); max rounds %lld\n",
      worst_late_bytes, worst_mixed_excess, static_cast<long long>(max_rounds));
  RecordProperty("worst_mixed_excess", std::to_string(worst_mixed_excess));
}

// The 3-device example of link_model_test where SJF loses: 0->1: 3, 0->2: 2, 2->1: 4 on
// 1-byte/s links. Bound 7 (ingress 1 receives 3 + 4). Exact chunks and times.
TEST(AuroraPreemptive, SmallExampleByHand) {
  BigSwitchNetwork net = unit_network(3);
  const TrafficMatrix b = {{0, 3, 2}, {0, 0, 0}, {0, 4, 0}};
  const OrderPlan plan = order_aurora_preemptive(net, b, 0.0);
  EXPECT_DOUBLE_EQ(plan.predicted_s, 7.0);
  EXPECT_DOUBLE_EQ(plan.lower_bound_s, 7.0);
  expect_conserves(b, plan.transfers, "hand");
  EXPECT_DOUBLE_EQ(makespan_of(net, order_sjf(b, 0.0)), 9.0);
}

TEST(AuroraPreemptive, EdgeCases) {
  // One device, all zero, diagonal only: nothing to send.
  BigSwitchNetwork one = unit_network(1);
  EXPECT_TRUE(order_aurora_preemptive(one, {{5}}, 0.0).transfers.empty());
  BigSwitchNetwork three = unit_network(3);
  const OrderPlan zero = order_aurora_preemptive(three, {{7, 0, 0}, {0, 0, 0}, {0, 0, 9}}, 0.0);
  EXPECT_TRUE(zero.transfers.empty());
  EXPECT_EQ(zero.num_rounds, 0);
  EXPECT_DOUBLE_EQ(zero.predicted_s, 0.0);

  // Ready time shifts everything; a permutation is one round of whole transfers.
  const TrafficMatrix perm = {{0, 5, 0}, {0, 0, 3}, {4, 0, 0}};
  const OrderPlan shifted = order_aurora_preemptive(three, perm, 2.5);
  ASSERT_EQ(shifted.transfers.size(), 3u);
  for (const Transfer& t : shifted.transfers) {
    EXPECT_DOUBLE_EQ(t.ready_s, 2.5);
  }
  EXPECT_DOUBLE_EQ(makespan(three.finish_times(shifted.transfers, 2.5), 2.5), 5.0);
  EXPECT_DOUBLE_EQ(shifted.predicted_s, 5.0);

  // Ideal (infinite) links take no time: sent whole, first.
  const double inf = std::numeric_limits<double>::infinity();
  BigSwitchNetwork ideal = mixed_network({inf, inf}, 0.0);
  const OrderPlan free_plan = order_aurora_preemptive(ideal, {{0, 8}, {9, 0}}, 0.0);
  expect_conserves({{0, 8}, {9, 0}}, free_plan.transfers, "ideal");
  EXPECT_DOUBLE_EQ(free_plan.predicted_s, 0.0);

  // Intra- vs inter-node rates differ even with identical devices: mixed path.
  absl::StatusOr<BigSwitchNetwork> nodes =
      BigSwitchNetwork::uniform(4, 2, {4.0, 0.0}, {1.0, 0.0}, kUnit);
  ASSERT_TRUE(nodes.ok());
  const TrafficMatrix m = {{0, 40, 4, 4}, {8, 0, 4, 0}, {4, 0, 0, 40}, {4, 8, 20, 0}};
  const OrderPlan plan = order_aurora_preemptive(*nodes, m, 0.0);
  expect_conserves(m, plan.transfers, "nodes");
  EXPECT_NEAR(plan.predicted_s, port_load_lower_bound(*nodes, m),
              static_cast<double>(plan.num_rounds));
}

// With latency every chunk pays it; the makespan stays within num_rounds latencies of the
// latency-free bound, and splitting is visible in num_chunks.
TEST(AuroraPreemptive, LatencyCostsAtMostOnePerRound) {
  engine::SplitMix64 rng(test_seed() + 1);
  for (int c = 0; c < 200; ++c) {
    const auto n = static_cast<int32_t>(rng.uniform_int(2, 8));
    constexpr double kLatency = 2e-6;
    BigSwitchNetwork with = mixed_network(std::vector<double>(static_cast<size_t>(n), 50e9),
                                          kLatency);
    BigSwitchNetwork without =
        mixed_network(std::vector<double>(static_cast<size_t>(n), 50e9), 0.0);
    const TrafficMatrix m = random_matrix(rng, n, 4 << 20);
    const OrderPlan plan = order_aurora_preemptive(with, m, 0.0);
    expect_conserves(m, plan.transfers, "latency");
    const double free_bound = port_load_lower_bound(without, m);
    EXPECT_GE(plan.predicted_s, port_load_lower_bound(with, m) * (1 - 1e-12));
    EXPECT_LE(plan.predicted_s,
              free_bound * (1 + 1e-9) + static_cast<double>(plan.num_rounds) * kLatency);
    int64_t pairs = 0;
    for (size_t i = 0; i < m.size(); ++i) {
      for (size_t j = 0; j < m.size(); ++j) {
        pairs += i != j && m[i][j] > 0;
      }
    }
    EXPECT_GE(plan.num_chunks, pairs);
  }
}

// ---------------------------------------------------------------------------------------
// Unsplit order (Algorithm 1)

TEST(AuroraUnsplit, ContentionFreeAndWithinTwiceTheBoundOnRandomMatrices) {
  engine::SplitMix64 rng(test_seed() + 2);
  double sum_gap = 0.0;
  double worst_gap = 0.0;
  int at_bound = 0;
  int counted = 0;
  for (int c = 0; c < 3000; ++c) {
    const Case k = random_case(rng, c);
    const OrderPlan plan = order_aurora_unsplit(k.net, k.bytes, 0.0);
    const double bound = port_load_lower_bound(k.net, k.bytes);
    expect_conserves(k.bytes, plan.transfers, k.what);
    EXPECT_EQ(plan.num_rounds, 0);
    const double span = served_without_conflict(k.net, plan.transfers, bound, k.what);
    EXPECT_DOUBLE_EQ(plan.predicted_s, span) << k.what;
    EXPECT_GE(span, bound * (1 - 1e-12)) << k.what;
    // Dense-schedule guard: the last transfer (i, j) waited only while port i or j was busy.
    EXPECT_LE(span, 2 * bound * (1 + 1e-12)) << k.what;
    std::vector<std::vector<int>> pairs(k.bytes.size(), std::vector<int>(k.bytes.size(), 0));
    for (const Transfer& t : plan.transfers) {
      EXPECT_EQ(++pairs[static_cast<size_t>(t.src)][static_cast<size_t>(t.dst)], 1) << k.what;
    }
    if (bound > 0) {
      const double gap = span / bound - 1;
      sum_gap += gap;
      worst_gap = std::max(worst_gap, gap);
      at_bound += gap <= 1e-9;
      ++counted;
    }
  }
  const double mean_gap = sum_gap / counted;
  std::printf("unsplit: mean distance from bound %.4f, worst %.4f, at bound %d of %d\n",
              mean_gap, worst_gap, at_bound, counted);
  RecordProperty("unsplit_mean_gap", std::to_string(mean_gap));
  RecordProperty("unsplit_at_bound", std::to_string(at_bound) + "/" + std::to_string(counted));
}

// ---------------------------------------------------------------------------------------
// Against the baselines

// A hot expert on device 3 receives from everyone (0->3: 4, 1->3: 5, 2->3: 6) while a small
// ring runs (0->1: 2, 1->2: 3, 2->0: 1); 1-byte/s links. Ingress 3 carries 15 = the bound.
//   SJF  2->0 [0,1], 0->1 [0,2], 1->2 [0,3], 0->3 [2,6], 1->3 [6,11], 2->3 [11,17] -> 17:
//        ingress 3 idles for [0,2] while egress 0 sends its small part first.
//   Aurora unsplit: device 3 first, busiest sender first (egress loads 0: 6, 1: 8, 2: 7):
//        1->3 [0,5], 2->3 [5,11], 0->3 [11,15]; then 0->1 [0,2], 1->2 [5,8], 2->0 [0,1]
//        fit around them -> 15 = bound.
//   Aurora preemptive -> 15 as well. Random orders cannot beat the bound.
TEST(AuroraOrder, BeatsSjfAndRandomOnASkewedMatrix) {
  BigSwitchNetwork net = unit_network(4);
  const TrafficMatrix m = {{0, 2, 0, 4}, {0, 0, 3, 5}, {1, 0, 0, 6}, {0, 0, 0, 0}};
  EXPECT_DOUBLE_EQ(port_load_lower_bound(net, m), 15.0);
  EXPECT_EQ(net.finish_times(order_sjf(m, 0.0), 0.0),
            (std::vector<double>{1, 2, 3, 6, 11, 17}));
  const OrderPlan unsplit = order_aurora_unsplit(net, m, 0.0);
  EXPECT_DOUBLE_EQ(unsplit.predicted_s, 15.0);
  EXPECT_DOUBLE_EQ(makespan_of(net, unsplit.transfers), 15.0);
  const OrderPlan preemptive = order_aurora_preemptive(net, m, 0.0);
  EXPECT_DOUBLE_EQ(makespan_of(net, preemptive.transfers), 15.0);
  double worst_random = 0.0;
  for (uint64_t seed = 0; seed < 32; ++seed) {
    const double r = makespan_of(net, order_random(m, seed, 0.0));
    EXPECT_GE(r, 15.0);
    worst_random = std::max(worst_random, r);
  }
  EXPECT_GT(worst_random, 15.0);  // some random order does contend
}

// Aurora Fig. 4: devices 0 and 1 each send one unit to 2 and to 3; both orders pair them up
// so the all-to-all takes b_max = 2, not 3.
TEST(AuroraOrder, Figure4ReachesTheBound) {
  BigSwitchNetwork net = unit_network(4);
  const TrafficMatrix d = {{0, 0, 1, 1}, {0, 0, 1, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}};
  EXPECT_DOUBLE_EQ(order_aurora_unsplit(net, d, 0.0).predicted_s, 2.0);
  EXPECT_DOUBLE_EQ(order_aurora_preemptive(net, d, 0.0).predicted_s, 2.0);
}

// ---------------------------------------------------------------------------------------
// Selector

TEST(A2aOrderSelector, ParsesNamesRoundTripsAndDispatches) {
  for (A2aOrder order : {A2aOrder::kRowMajor, A2aOrder::kRandom, A2aOrder::kSjf,
                         A2aOrder::kAurora, A2aOrder::kAuroraChunked, A2aOrder::kAuroraUnsplit}) {
    absl::StatusOr<A2aOrder> parsed = parse_a2a_order(a2a_order_name(order));
    ASSERT_TRUE(parsed.ok()) << a2a_order_name(order);
    EXPECT_EQ(*parsed, order);
  }
  for (std::string_view bad : {"", "Aurora", "aurora-unsplit", "fifo"}) {
    absl::StatusOr<A2aOrder> parsed = parse_a2a_order(bad);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("'" + std::string(bad) + "'"));
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("aurora_unsplit"));
  }

  BigSwitchNetwork net = unit_network(3);
  const TrafficMatrix m = {{9, 3, 0}, {1, 9, 2}, {2, 5, 9}};
  auto key = [](const std::vector<Transfer>& v) {
    std::vector<int64_t> k;
    for (const Transfer& t : v) {
      k.push_back((t.src * 1000 + t.dst) * 1000 + t.bytes);
    }
    return k;
  };
  EXPECT_EQ(key(order_all_to_all(A2aOrder::kRowMajor, net, m, 0.0, 1)),
            key(order_row_major(m, 0.0)));
  EXPECT_EQ(key(order_all_to_all(A2aOrder::kRandom, net, m, 0.0, 7)),
            key(order_random(m, 7, 0.0)));
  EXPECT_EQ(key(order_all_to_all(A2aOrder::kSjf, net, m, 0.0, 1)), key(order_sjf(m, 0.0)));
  EXPECT_EQ(key(order_all_to_all(A2aOrder::kAuroraChunked, net, m, 0.0, 1)),
            key(order_aurora_preemptive(net, m, 0.0).transfers));
  EXPECT_EQ(key(order_all_to_all(A2aOrder::kAurora, net, m, 0.0, 1)),
            key(order_aurora(net, m, 0.0).transfers));
  EXPECT_EQ(key(order_all_to_all(A2aOrder::kAuroraUnsplit, net, m, 0.0, 1)),
            key(order_aurora_unsplit(net, m, 0.0).transfers));
}

}  // namespace
}  // namespace muflow::transport
