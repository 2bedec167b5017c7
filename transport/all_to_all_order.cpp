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
double fair_share_lower_bound(const BigSwitchNetwork& network, const TrafficMatrix& bytes) {
  const size_t n = bytes.size();
  // [device][0 egress intra, 1 egress inter, 2 ingress intra, 3 ingress inter]
  std::vector<std::array<double, 4>> load(n, {0.0, 0.0, 0.0, 0.0});
  std::vector<std::array<double, 4>> latency(
      n, {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(),
          std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()});
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j || bytes[i][j] == 0) continue;
      const auto src = static_cast<int32_t>(i);
      const auto dst = static_cast<int32_t>(j);
      const size_t kind = network.same_node(src, dst) ? 0 : 1;
      const double lat = network.path(src, dst).latency_s;
      const double b = static_cast<double>(bytes[i][j]);
      load[i][kind] += b;
      load[j][2 + kind] += b;
      latency[i][kind] = std::min(latency[i][kind], lat);
      latency[j][2 + kind] = std::min(latency[j][2 + kind], lat);
    }
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

double port_load_lower_bound(const BigSwitchNetwork& network, const TrafficMatrix& bytes) {
  check_matrix(bytes);
  const size_t n = bytes.size();
  MUFLOW_ASSERT(n == static_cast<size_t>(network.num_devices()),
                "traffic matrix size differs from the network");
  if (network.model() == NetworkModel::kFairShare) return fair_share_lower_bound(network, bytes);
  std::vector<double> egress(n, 0.0);
  std::vector<double> ingress(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const double s =
          network.transfer_seconds(static_cast<int32_t>(i), static_cast<int32_t>(j), bytes[i][j]);
      egress[i] += s;
      ingress[j] += s;
    }
  }
  double bound = 0.0;
  for (size_t i = 0; i < n; ++i) {
    bound = std::max({bound, egress[i], ingress[i]});
  }
  return bound;
}

std::vector<Transfer> order_row_major(const TrafficMatrix& bytes, double ready_s) {
  check_matrix(bytes);
  std::vector<Transfer> order;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (size_t j = 0; j < bytes.size(); ++j) {
      if (i == j || bytes[i][j] == 0) {
        continue;
      }
      order.push_back({static_cast<int32_t>(i), static_cast<int32_t>(j), bytes[i][j], ready_s});
    }
  }
  return order;
}

std::vector<Transfer> order_random(const TrafficMatrix& bytes, uint64_t seed, double ready_s) {
  std::vector<Transfer> order = order_row_major(bytes, ready_s);
  engine::SplitMix64 rng(seed);
  for (size_t k = order.size(); k > 1; --k) {
    const auto pick = static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(k) - 1));
    std::swap(order[k - 1], order[pick]);
  }
  return order;
}

std::vector<Transfer> order_sjf(const TrafficMatrix& bytes, double ready_s) {
  std::vector<Transfer> order = order_row_major(bytes, ready_s);
  std::sort(order.begin(), order.end(), [](const Transfer& a, const Transfer& b) {
    return std::tie(a.bytes, a.src, a.dst) < std::tie(b.bytes, b.src, b.dst);
  });
  return order;
}

double makespan(const std::vector<double>& finish_s, double now_s) {
  double latest = now_s;
  for (double f : finish_s) {
    latest = std::max(latest, f);
  }
  return latest - now_s;
}

}  // namespace muflow::transport
