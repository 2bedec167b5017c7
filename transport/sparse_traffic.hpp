#pragma once
/// \file
/// An all-to-all's traffic as its non-zero entries. A barrier all-to-all among N devices
/// moves rows between at most (tokens × top-k) device pairs, far fewer than N² at 256–1,024
/// simulated devices; the sim's collectives build this form in O(pairs) and the network
/// model, the bounds and the row-major / random / SJF orders read it without touching the
/// N² zeros (#19 item 6). The dense `TrafficMatrix` stays the planners' form
/// (`muflow plan`, Aurora's orders); `dense_traffic` / `sparse_traffic` convert.

#include <cstdint>
#include <vector>

namespace muflow::transport {

/// bytes[i][j] = bytes device i sends to device j; [num_devices][num_devices], entries >= 0
/// (shape and sign are caller invariants, checked by MUFLOW_ASSERT). The diagonal is
/// in-device traffic: the bounds and orders leave it out (Aurora §4.2, footnote 1).
using TrafficMatrix = std::vector<std::vector<int64_t>>;

/// One device pair's bytes: src != dst, bytes > 0.
struct TrafficEntry {
  int32_t src = 0;
  int32_t dst = 0;
  int64_t bytes = 0;
};

/// A traffic matrix over `num_devices` devices as its off-diagonal non-zero entries, each
/// pair once, in row-major order (src ascending, then dst ascending): the order in which a
/// loop over the dense matrix meets them, so sums over it round as the dense loops did.
/// Built by `TrafficBuilder` or `sparse_traffic`; a value type, no thread affinity.
struct SparseTraffic {
  int32_t num_devices = 0;
  std::vector<TrafficEntry> entries;
};

/// Accumulates bytes per device pair in any order (the same pair may be added many times;
/// zero bytes and src == dst are accepted and dropped), then `build()` merges them. Memory
/// O(additions), never O(num_devices²). One owner; not thread safe.
class TrafficBuilder {
 public:
  /// `num_devices` >= 1.
  explicit TrafficBuilder(int32_t num_devices);
  /// Adds `bytes` (>= 0) from device `src` to device `dst` (both in [0, num_devices)).
  /// Out-of-range devices or negative bytes abort (MUFLOW_ASSERT): callers pass sites of
  /// a validated placement and row counts.
  void add(int32_t src, int32_t dst, int64_t bytes);
  /// The merged entries (sums of int64 bytes: exact, independent of the order of `add`s).
  SparseTraffic build() const;
  int32_t num_devices() const { return num_devices_; }

 private:
  int32_t num_devices_;
  std::vector<TrafficEntry> added_;
};

/// True when `traffic` keeps SparseTraffic's invariants: num_devices >= 0, every entry's
/// devices in [0, num_devices), src != dst, bytes > 0, entries strictly ascending by
/// (src, dst). The sparse bound, orders and channel assert it (O(entries)): a struct filled
/// by hand that breaks it would otherwise index out of range or mis-attribute finish times.
bool well_formed(const SparseTraffic& traffic);

/// The non-zero off-diagonal entries of `bytes` (square, entries >= 0; asserted).
SparseTraffic sparse_traffic(const TrafficMatrix& bytes);

/// The dense [num_devices]² matrix of `traffic` (zeros elsewhere).
TrafficMatrix dense_traffic(const SparseTraffic& traffic);

}  // namespace muflow::transport
