#include "transport/all_to_all_order.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <tuple>

#include "engine/splitmix64.hpp"
#include "kernels/assert.hpp"

namespace muflow::transport {
namespace {

void check_matrix(const TrafficMatrix& bytes) {
  for (const auto& row : bytes) {
    MUFLOW_ASSERT(row.size() == bytes.size(), "traffic matrix is not square");
    for (int64_t b : row) {
      MUFLOW_ASSERT(b >= 0, "traffic matrix entry is negative");
    }
  }
}

}  // namespace

double all_to_all_lower_bound(const TrafficMatrix& bytes, const std::vector<double>& egress_bw,
                              const std::vector<double>& ingress_bw) {
  check_matrix(bytes);
  const size_t n = bytes.size();
  MUFLOW_ASSERT(egress_bw.size() == n && ingress_bw.size() == n,
                "bandwidth vector size differs from the traffic matrix");
  double bound = 0.0;
  for (size_t i = 0; i < n; ++i) {
    int64_t row = 0;
    int64_t col = 0;
    for (size_t j = 0; j < n; ++j) {
      if (j == i) {
        continue;
      }
      row += bytes[i][j];
      col += bytes[j][i];
    }
    MUFLOW_ASSERT(egress_bw[i] > 0.0 && ingress_bw[i] > 0.0, "bandwidth must be > 0");
    bound = std::max(
        {bound, static_cast<double>(row) / egress_bw[i], static_cast<double>(col) / ingress_bw[i]});
  }
  return bound;
}

double all_to_all_lower_bound(const TrafficMatrix& bytes, const std::vector<double>& bw) {
  return all_to_all_lower_bound(bytes, bw, bw);
}

namespace {

/// port_load_lower_bound under NetworkModel::kFairShare: every resource (a device's egress
/// or ingress for intra- or inter-node traffic) moves at most its bandwidth, and the last
/// flow through it still pays its latency after its last byte, so no schedule beats
/// max over resources of (bytes through it / its bandwidth + the least latency of its
/// flows). Aurora's b_max (Theorem 5.2) with latencies, per link class.
double fair_share_lower_bound(const BigSwitchNetwork& network, const SparseTraffic& traffic) {
  const auto n = static_cast<size_t>(traffic.num_devices);
  // [device][0 egress intra, 1 egress inter, 2 ingress intra, 3 ingress inter]
  std::vector<std::array<double, 4>> load(n, {0.0, 0.0, 0.0, 0.0});
  std::vector<std::array<double, 4>> latency(
      n, {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(),
          std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()});
  for (const TrafficEntry& e : traffic.entries) {
    const auto i = static_cast<size_t>(e.src);
    const auto j = static_cast<size_t>(e.dst);
    const size_t kind = network.same_node(e.src, e.dst) ? 0 : 1;
    const double lat = network.path(e.src, e.dst).latency_s;
    const double b = static_cast<double>(e.bytes);
    load[i][kind] += b;
    load[j][2 + kind] += b;
    latency[i][kind] = std::min(latency[i][kind], lat);
    latency[j][2 + kind] = std::min(latency[j][2 + kind], lat);
  }
  double bound = 0.0;
  for (size_t d = 0; d < n; ++d) {
    const DeviceLinks& links = network.device(static_cast<int32_t>(d));
    for (size_t r = 0; r < 4; ++r) {
      if (load[d][r] == 0.0) continue;
      const LinkClass& link = r % 2 == 0 ? links.intra_node : links.inter_node;
      bound = std::max(bound, load[d][r] / link.bandwidth_bytes_per_s + latency[d][r]);
    }
  }
  return bound;
}

}  // namespace

double port_load_lower_bound(const BigSwitchNetwork& network, const SparseTraffic& traffic) {
  const auto n = static_cast<size_t>(traffic.num_devices);
  MUFLOW_ASSERT(n == static_cast<size_t>(network.num_devices()),
                "traffic matrix size differs from the network");
  MUFLOW_ASSERT(well_formed(traffic), "sparse traffic is not well formed");
  if (network.model() == NetworkModel::kFairShare) return fair_share_lower_bound(network, traffic);
  // Row-major entries: each port's sum runs in the dense loops' order (zeros added nothing).
  std::vector<double> egress(n, 0.0);
  std::vector<double> ingress(n, 0.0);
  for (const TrafficEntry& e : traffic.entries) {
    const double s = network.transfer_seconds(e.src, e.dst, e.bytes);
    egress[static_cast<size_t>(e.src)] += s;
    ingress[static_cast<size_t>(e.dst)] += s;
  }
  double bound = 0.0;
  for (size_t i = 0; i < n; ++i) {
    bound = std::max({bound, egress[i], ingress[i]});
  }
  return bound;
}

double port_load_lower_bound(const BigSwitchNetwork& network, const TrafficMatrix& bytes) {
  return port_load_lower_bound(network, sparse_traffic(bytes));
}

namespace {

// The entries as transfers, in their (row-major) order; `traffic` already checked.
std::vector<Transfer> row_major(const SparseTraffic& traffic, double ready_s) {
  std::vector<Transfer> order;
  order.reserve(traffic.entries.size());
  for (const TrafficEntry& e : traffic.entries) order.push_back({e.src, e.dst, e.bytes, ready_s});
  return order;
}

}  // namespace

std::vector<Transfer> order_row_major(const SparseTraffic& traffic, double ready_s) {
  MUFLOW_ASSERT(well_formed(traffic), "sparse traffic is not well formed");
  return row_major(traffic, ready_s);
}

std::vector<Transfer> order_row_major(const TrafficMatrix& bytes, double ready_s) {
  return order_row_major(sparse_traffic(bytes), ready_s);
}

std::vector<Transfer> order_random(const SparseTraffic& traffic, uint64_t seed, double ready_s) {
  MUFLOW_ASSERT(well_formed(traffic), "sparse traffic is not well formed");
  std::vector<Transfer> order = row_major(traffic, ready_s);
  engine::SplitMix64 rng(seed);
  for (size_t k = order.size(); k > 1; --k) {
    const auto pick = static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(k) - 1));
    std::swap(order[k - 1], order[pick]);
  }
  return order;
}

std::vector<Transfer> order_random(const TrafficMatrix& bytes, uint64_t seed, double ready_s) {
  return order_random(sparse_traffic(bytes), seed, ready_s);
}

std::vector<Transfer> order_sjf(const SparseTraffic& traffic, double ready_s) {
  MUFLOW_ASSERT(well_formed(traffic), "sparse traffic is not well formed");
  std::vector<Transfer> order = row_major(traffic, ready_s);
  std::sort(order.begin(), order.end(), [](const Transfer& a, const Transfer& b) {
    return std::tie(a.bytes, a.src, a.dst) < std::tie(b.bytes, b.src, b.dst);
  });
  return order;
}

std::vector<Transfer> order_sjf(const TrafficMatrix& bytes, double ready_s) {
  return order_sjf(sparse_traffic(bytes), ready_s);
}

double makespan(const std::vector<double>& finish_s, double now_s) {
  double latest = now_s;
  for (double f : finish_s) {
    latest = std::max(latest, f);
  }
  return latest - now_s;
}

}  // namespace muflow::transport
