#include "transport/all_to_all_order.hpp"

#include <algorithm>
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

double port_load_lower_bound(const BigSwitchNetwork& network, const TrafficMatrix& bytes) {
  check_matrix(bytes);
  const size_t n = bytes.size();
  MUFLOW_ASSERT(n == static_cast<size_t>(network.num_devices()),
                "traffic matrix size differs from the network");
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
