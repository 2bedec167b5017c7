#include "transport/sparse_traffic.hpp"

#include <algorithm>
#include <tuple>

#include "kernels/assert.hpp"

namespace muflow::transport {

TrafficBuilder::TrafficBuilder(int32_t num_devices) : num_devices_(num_devices) {
  MUFLOW_ASSERT(num_devices >= 1, "traffic over no devices");
}

void TrafficBuilder::add(int32_t src, int32_t dst, int64_t bytes) {
  MUFLOW_ASSERT(src >= 0 && src < num_devices_ && dst >= 0 && dst < num_devices_,
                "traffic between devices outside the network");
  MUFLOW_ASSERT(bytes >= 0, "traffic entry is negative");
  if (src == dst || bytes == 0) return;
  added_.push_back({src, dst, bytes});
}

SparseTraffic TrafficBuilder::build() const {
  SparseTraffic out;
  out.num_devices = num_devices_;
  out.entries = added_;
  // Collectives add their flows in (source, destination) order, which is mostly (src, dst)
  // order already (a rank per device, slots in device order): a check is O(n), the sort of a
  // 1,024-device barrier's ~35,000 entries is not (#19 item 6). Equal pairs are summed, so
  // their order does not matter.
  const auto by_pair = [](const TrafficEntry& a, const TrafficEntry& b) {
    return std::tie(a.src, a.dst) < std::tie(b.src, b.dst);
  };
  if (!std::is_sorted(out.entries.begin(), out.entries.end(), by_pair)) {
    std::sort(out.entries.begin(), out.entries.end(), by_pair);
  }
  size_t kept = 0;
  for (size_t i = 0; i < out.entries.size(); ++i) {
    if (kept > 0 && out.entries[kept - 1].src == out.entries[i].src &&
        out.entries[kept - 1].dst == out.entries[i].dst) {
      out.entries[kept - 1].bytes += out.entries[i].bytes;
    } else {
      out.entries[kept++] = out.entries[i];
    }
  }
  out.entries.resize(kept);
  return out;
}

bool well_formed(const SparseTraffic& traffic) {
  if (traffic.num_devices < 0) return false;
  for (size_t i = 0; i < traffic.entries.size(); ++i) {
    const TrafficEntry& e = traffic.entries[i];
    if (e.src < 0 || e.src >= traffic.num_devices || e.dst < 0 || e.dst >= traffic.num_devices ||
        e.src == e.dst || e.bytes <= 0) {
      return false;
    }
    if (i > 0) {
      const TrafficEntry& p = traffic.entries[i - 1];
      if (std::tie(p.src, p.dst) >= std::tie(e.src, e.dst)) return false;
    }
  }
  return true;
}

SparseTraffic sparse_traffic(const TrafficMatrix& bytes) {
  SparseTraffic out;
  out.num_devices = static_cast<int32_t>(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    MUFLOW_ASSERT(bytes[i].size() == bytes.size(), "traffic matrix is not square");
    for (size_t j = 0; j < bytes.size(); ++j) {
      MUFLOW_ASSERT(bytes[i][j] >= 0, "traffic matrix entry is negative");
      if (i == j || bytes[i][j] == 0) continue;
      out.entries.push_back({static_cast<int32_t>(i), static_cast<int32_t>(j), bytes[i][j]});
    }
  }
  return out;
}

TrafficMatrix dense_traffic(const SparseTraffic& traffic) {
  const auto n = static_cast<size_t>(traffic.num_devices);
  TrafficMatrix out(n, std::vector<int64_t>(n, 0));
  for (const TrafficEntry& e : traffic.entries) {
    out[static_cast<size_t>(e.src)][static_cast<size_t>(e.dst)] += e.bytes;
  }
  return out;
}

}  // namespace muflow::transport
