// Max-min fair bandwidth sharing (transport/fair_share.hpp) and the big switch's fair-share
// model (`[network] model = "fair-share"`): closed-form cases, the model's lower bound,
// commitment across calls, and capacity never exceeded on random all-to-alls.

#include "transport/fair_share.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/splitmix64.hpp"
#include "kernels/assert.hpp"
#include "transport/all_to_all_order.hpp"
#include "transport/aurora_order.hpp"
#include "transport/big_switch_network.hpp"

namespace muflow::transport {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One node of devices with the given per-direction bandwidths (bytes/s) and latency.
BigSwitchNetwork node_of(const std::vector<double>& bw, double latency_s, NetworkModel model) {
  std::vector<DeviceLinks> devices;
  for (double b : bw) devices.push_back({0, {b, latency_s}, {b, latency_s}, {b, latency_s}});
  absl::StatusOr<BigSwitchNetwork> net = BigSwitchNetwork::create(std::move(devices), model);
  MUFLOW_ASSERT(net.ok(), "test network");
  return *std::move(net);
}

TEST(NetworkModelTest, ParsesBothNamesAndRejectsOthers) {
  EXPECT_EQ(*parse_network_model("serial"), NetworkModel::kSerial);
  EXPECT_EQ(*parse_network_model("fair-share"), NetworkModel::kFairShare);
  EXPECT_EQ(network_model_name(NetworkModel::kFairShare), "fair-share");
  EXPECT_EQ(network_model_name(NetworkModel::kSerial), "serial");
  absl::StatusOr<NetworkModel> bad = parse_network_model("fair_share");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("serial, fair-share"), std::string::npos);
}

// A flow alone runs at the slower of its two ports and pays its latency once: the same time
// in both models.
TEST(FairShareTest, OneFlowAloneTakesLatencyPlusBytesOverTheSlowerPort) {
  for (NetworkModel model : {NetworkModel::kSerial, NetworkModel::kFairShare}) {
    BigSwitchNetwork net = node_of({10.0, 4.0}, 0.5, model);
    EXPECT_DOUBLE_EQ(net.schedule({0, 1, 100, 2.0}), 2.0 + 0.5 + 100.0 / 4.0);
  }
}

// Two flows out of one sender port: each gets half its bandwidth, both finish together,
// where the serial port finishes one at half the time and the other at the same end.
TEST(FairShareTest, TwoFlowsSharingASenderPortSplitItEqually) {
  const std::vector<Transfer> flows = {{0, 1, 100, 0.0}, {0, 2, 100, 0.0}};
  BigSwitchNetwork fair = node_of({10.0, 10.0, 10.0}, 0.0, NetworkModel::kFairShare);
  EXPECT_EQ(fair.finish_times(flows, 0.0), (std::vector<double>{20.0, 20.0}));
  BigSwitchNetwork serial = node_of({10.0, 10.0, 10.0}, 0.0, NetworkModel::kSerial);
  EXPECT_EQ(serial.finish_times(flows, 0.0), (std::vector<double>{10.0, 20.0}));
}

// Aurora's mixed-speed case: one 100 B/s sender, two 40 B/s receivers, 400 bytes each. The
// receivers bound the all-to-all at 400 / 40 = 10 s (b_max, Theorem 5.2). Sharing reaches
// it (40 + 40 <= 100); ports that serve one transfer at a time take 2x whatever the order.
TEST(FairShareTest, MixedSpeedsReachAurorasBoundOnlyWhenShared) {
  const TrafficMatrix bytes = {{0, 400, 400}, {0, 0, 0}, {0, 0, 0}};
  const double b_max = all_to_all_lower_bound(bytes, {100.0, 40.0, 40.0});
  EXPECT_DOUBLE_EQ(b_max, 10.0);

  BigSwitchNetwork fair = node_of({100.0, 40.0, 40.0}, 0.0, NetworkModel::kFairShare);
  EXPECT_DOUBLE_EQ(makespan(fair.finish_times(order_row_major(bytes, 0.0), 0.0), 0.0), b_max);
  EXPECT_DOUBLE_EQ(port_load_lower_bound(fair, bytes), b_max);

  BigSwitchNetwork serial = node_of({100.0, 40.0, 40.0}, 0.0, NetworkModel::kSerial);
  for (const std::vector<Transfer>& order :
       {order_row_major(bytes, 0.0), order_sjf(bytes, 0.0), order_random(bytes, 7, 0.0)}) {
    EXPECT_DOUBLE_EQ(makespan(serial.finish_times(order, 0.0), 0.0), 2.0 * b_max);
  }
  // The serial model's own bound says so: no order of it reaches b_max.
  EXPECT_DOUBLE_EQ(port_load_lower_bound(serial, bytes), 2.0 * b_max);
}

// Progressive filling with unequal rates. Devices 0, 1 send at 10 B/s; device 2 receives at
// 2, device 3 at 10. A: 0->2 (20 B), B: 0->3 (50 B), C: 1->3 (100 B). Filling: device 2's
// ingress freezes A at 2; device 3's ingress then splits 10 between B and C (5 each), which
// leaves device 0's egress 3 spare. At t = 10 A and B have drained; C, alone, speeds up to
// 10 B/s for its last 50 B: t = 15.
TEST(FairShareTest, ProgressiveFillingGivesUnequalRatesAndRecomputesWhenFlowsEnd) {
  BigSwitchNetwork net = node_of({10.0, 10.0, 2.0, 10.0}, 0.0, NetworkModel::kFairShare);
  const std::vector<double> done =
      net.finish_times({{0, 2, 20, 0.0}, {0, 3, 50, 0.0}, {1, 3, 100, 0.0}}, 0.0);
  EXPECT_DOUBLE_EQ(done[0], 10.0);
  EXPECT_DOUBLE_EQ(done[1], 10.0);
  EXPECT_DOUBLE_EQ(done[2], 15.0);
}

// A flow that becomes ready later joins the sharing then (event driven): X 0->1 (100 B at
// 10 B/s) runs alone for 4 s (40 B), then shares device 0's egress with Y 0->2 (ready at 4,
// 30 B) at 5 each; Y drains at 10, X has 30 B left at 10 B/s: 13.
TEST(FairShareTest, LaterReadyFlowJoinsTheSharing) {
  BigSwitchNetwork net = node_of({10.0, 10.0, 10.0}, 0.0, NetworkModel::kFairShare);
  const std::vector<double> done = net.finish_times({{0, 1, 100, 0.0}, {0, 2, 30, 4.0}}, 0.0);
  EXPECT_DOUBLE_EQ(done[1], 10.0);
  EXPECT_DOUBLE_EQ(done[0], 13.0);
}

// Calls after the first see the capacity committed flows leave: arrival times, once
// promised, never move. finish_times is pure.
TEST(FairShareTest, LaterCallsGetTheCapacityEarlierCallsLeft) {
  BigSwitchNetwork net = node_of({10.0, 10.0, 10.0, 10.0}, 0.0, NetworkModel::kFairShare);
  EXPECT_DOUBLE_EQ(net.schedule({0, 1, 100, 0.0}), 10.0);
  // Pure: asking twice gives the same answer and commits nothing.
  EXPECT_DOUBLE_EQ(net.finish_times({{0, 2, 50, 0.0}}, 0.0).front(), 15.0);
  EXPECT_DOUBLE_EQ(net.finish_times({{0, 2, 50, 0.0}}, 0.0).front(), 15.0);
  // Device 0's egress is full until 10: a second flow out of it waits, then runs at 10.
  EXPECT_DOUBLE_EQ(net.schedule({0, 2, 50, 0.0}), 15.0);
  // Device 3 -> 1: device 1's ingress is full until 10.
  EXPECT_DOUBLE_EQ(net.schedule({3, 1, 20, 5.0}), 12.0);
  // A transfer on untouched ports is not delayed.
  EXPECT_DOUBLE_EQ(net.schedule({3, 2, 20, 20.0}), 22.0);
  net.reset();
  EXPECT_DOUBLE_EQ(net.schedule({0, 2, 50, 0.0}), 5.0);
}

// Latency is paid after the last byte; an ideal link moves bytes in no time; zero bytes and
// in-device handoffs finish at their ready time.
TEST(FairShareTest, LatencyIdealLinksAndEmptyTransfers) {
  BigSwitchNetwork net = node_of({10.0, 10.0, 10.0}, 0.25, NetworkModel::kFairShare);
  const std::vector<double> done =
      net.schedule_all({{0, 1, 50, 1.0}, {2, 1, 50, 1.0}, {1, 1, 99, 3.0}, {0, 2, 0, 4.0}});
  EXPECT_DOUBLE_EQ(done[0], 1.0 + 10.0 + 0.25);
  EXPECT_DOUBLE_EQ(done[1], 1.0 + 10.0 + 0.25);
  EXPECT_DOUBLE_EQ(done[2], 3.0);
  EXPECT_DOUBLE_EQ(done[3], 4.0);
  BigSwitchNetwork ideal = node_of({kInf, kInf}, 0.5, NetworkModel::kFairShare);
  EXPECT_DOUBLE_EQ(ideal.schedule({0, 1, 1'000'000, 2.0}), 2.5);
}

// Intra- and inter-node traffic of one device use separate links under fair share (NVLink
// and the NIC): a flow on each finishes as if alone.
TEST(FairShareTest, IntraAndInterNodeLinksAreSeparateResources) {
  const LinkClass fast{100.0, 0.0};
  const LinkClass slow{10.0, 0.0};
  std::vector<DeviceLinks> devices = {
      {0, fast, slow, fast}, {0, fast, slow, fast}, {1, fast, slow, fast}};
  absl::StatusOr<BigSwitchNetwork> net =
      BigSwitchNetwork::create(devices, NetworkModel::kFairShare);
  ASSERT_TRUE(net.ok());
  const std::vector<double> done = net->finish_times({{0, 1, 100, 0.0}, {0, 2, 100, 0.0}}, 0.0);
  EXPECT_DOUBLE_EQ(done[0], 1.0);
  EXPECT_DOUBLE_EQ(done[1], 10.0);
  EXPECT_DOUBLE_EQ(port_load_lower_bound(*net, {{0, 100, 100}, {0, 0, 0}, {0, 0, 0}}), 10.0);
}

// Random all-to-alls on mixed bandwidths: fair share never beats its own bound, a uniform
// all-to-all reaches it, the order of one call's transfers does not change its times, and
// committed rates never exceed a resource's capacity.
TEST(FairShareTest, RandomAllToAllsRespectBoundOrderAndCapacity) {
  engine::SplitMix64 rng(20251123);
  for (int round = 0; round < 20; ++round) {
    const int n = 2 + static_cast<int>(rng.next() % 7);
    std::vector<double> bw;
    for (int d = 0; d < n; ++d) bw.push_back(10.0 * (1 + rng.next() % 10));
    TrafficMatrix bytes(n, std::vector<int64_t>(n, 0));
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (i != j && rng.next() % 4 != 0) {
          bytes[i][j] = static_cast<int64_t>(rng.next() % 1000);
        }
      }
    }
    BigSwitchNetwork net = node_of(bw, 0.001, NetworkModel::kFairShare);
    const std::vector<Transfer> rows = order_row_major(bytes, 0.0);
    const std::vector<double> a = net.finish_times(rows, 0.0);
    const std::vector<double> b = net.finish_times(order_sjf(bytes, 0.0), 0.0);
    EXPECT_GE(makespan(a, 0.0), port_load_lower_bound(net, bytes) * (1 - 1e-12));
    // Per pair, the two orders give the same time.
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::vector<Transfer> sjf = order_sjf(bytes, 0.0);
      for (size_t k = 0; k < sjf.size(); ++k) {
        if (sjf[k].src == rows[i].src && sjf[k].dst == rows[i].dst) {
          EXPECT_NEAR(a[i], b[k], 1e-9 * a[i]);
        }
      }
    }
    // Capacity: resources 4d (egress intra) and 4d + 2 (ingress intra) of each device.
    std::vector<double> caps;
    for (double c : bw) caps.insert(caps.end(), {c, c, c, c});
    FairShareLinks fair(caps);
    std::vector<FairShareFlow> flows;
    for (const Transfer& t : rows) {
      flows.push_back({4 * t.src, 4 * t.dst + 2, static_cast<double>(t.bytes), 0.0, 0.0});
    }
    const std::vector<double> done = fair.schedule(flows);
    const double end = makespan(done, 0.0);
    for (int step = 0; step < 50; ++step) {
      const double t = end * step / 50.0;
      for (int r = 0; r < 4 * n; ++r) {
        EXPECT_LE(fair.committed_rate(r, t), caps[static_cast<size_t>(r)] * (1 + 1e-9));
      }
    }
  }
  // Uniform: every device sends 100 B to every other at 10 B/s: (n - 1) * 10 s exactly.
  const int n = 6;
  TrafficMatrix uniform(n, std::vector<int64_t>(n, 100));
  for (int i = 0; i < n; ++i) uniform[i][i] = 0;
  BigSwitchNetwork net = node_of(std::vector<double>(n, 10.0), 0.0, NetworkModel::kFairShare);
  EXPECT_NEAR(makespan(net.finish_times(order_row_major(uniform, 0.0), 0.0), 0.0),
              port_load_lower_bound(net, uniform), 1e-9);
  EXPECT_DOUBLE_EQ(port_load_lower_bound(net, uniform), (n - 1) * 10.0);
}

// Aurora's heterogeneous case (§5, Theorem 5.2: four GPU types at 100/80/50/40 Gb/s in equal
// numbers), on skewed seeded traffic, no latency. Under the serial model no order reaches
// b_max (a fast port feeding a slow one is held at the slow rate); Aurora's chunked order
// reaches that model's own port-load bound and SJF / row-major do not. Under fair share every
// order takes the same time, never below b_max. The printed ratios are in bench/README.md,
// "Aurora's heterogeneous case (Theorem 5.2) under both network models".
TEST(FairShareTest, AurorasHeterogeneousCaseBothModels) {
  const std::vector<double> gbps = {100, 100, 80, 80, 50, 50, 40, 40};
  std::vector<double> bw;
  for (double g : gbps) bw.push_back(g * 1e9 / 8);
  engine::SplitMix64 rng(52);
  const size_t n = gbps.size();
  for (int round = 0; round < 3; ++round) {
    TrafficMatrix bytes(n, std::vector<int64_t>(n, 0));
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) {
        // Skewed: destination j gets weight 1 / (1 + j), times a random factor.
        if (i != j) bytes[i][j] = static_cast<int64_t>((1 + rng.next() % 100) * 1e5 / (1 + j));
      }
    }
    const double b_max = all_to_all_lower_bound(bytes, bw);
    BigSwitchNetwork serial = node_of(bw, 0.0, NetworkModel::kSerial);
    BigSwitchNetwork fair = node_of(bw, 0.0, NetworkModel::kFairShare);
    const double s_row = makespan(serial.finish_times(order_row_major(bytes, 0.0), 0.0), 0.0);
    const double s_sjf = makespan(serial.finish_times(order_sjf(bytes, 0.0), 0.0), 0.0);
    const double s_aurora =
        makespan(serial.finish_times(order_aurora(serial, bytes, 0.0).transfers, 0.0), 0.0);
    const double f_row = makespan(fair.finish_times(order_row_major(bytes, 0.0), 0.0), 0.0);
    const double f_sjf = makespan(fair.finish_times(order_sjf(bytes, 0.0), 0.0), 0.0);
    std::printf(
        "heterogeneous round %d: b_max %.3f ms; serial row-major %.3fx sjf %.3fx aurora "
        "%.3fx (serial bound %.3fx); fair-share %.3fx (any order)\n",
        round, b_max * 1e3, s_row / b_max, s_sjf / b_max, s_aurora / b_max,
        port_load_lower_bound(serial, bytes) / b_max, f_row / b_max);
    EXPECT_LE(s_aurora, s_sjf * (1 + 1e-12));
    EXPECT_LE(s_aurora, s_row * (1 + 1e-12));
    EXPECT_GE(s_aurora, port_load_lower_bound(serial, bytes) * (1 - 1e-9));
    EXPECT_NEAR(f_row, f_sjf, 1e-9 * f_row);
    EXPECT_GE(f_row, b_max * (1 - 1e-9));
    EXPECT_DOUBLE_EQ(port_load_lower_bound(fair, bytes), b_max);
  }
}

}  // namespace
}  // namespace muflow::transport
