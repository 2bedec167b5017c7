#pragma once
/// \file
/// All-to-all traffic matrices on the big switch: Aurora's lower bound b_max (Theorems 4.2
/// and 5.2), the port-load bound of this network model, and baseline transmission orders to
/// compare against. An order is just a `std::vector<Transfer>` served in sequence by
/// `BigSwitchNetwork`, so any ordering algorithm (e.g. Aurora's contention-free Algorithm 1,
/// aurora_order.hpp) plugs in without new API.

#include <cstdint>
#include <vector>

#include "transport/big_switch_network.hpp"
#include "transport/sparse_traffic.hpp"

namespace muflow::transport {

/// Aurora's minimum all-to-all time (seconds) with per-device bandwidths (Theorem 5.2;
/// Theorem 4.2 when all are equal): b_max = max( max_i sum_{j!=i} bytes[i][j] / egress_bw[i],
/// max_j sum_{i!=j} bytes[i][j] / ingress_bw[j] ). Ignores latency. Both bandwidth vectors
/// are [num_devices] bytes/s, > 0. 0 for an empty or all-zero matrix.
double all_to_all_lower_bound(const TrafficMatrix& bytes, const std::vector<double>& egress_bw,
                              const std::vector<double>& ingress_bw);

/// As above with the same bandwidth for each device's egress and ingress ([num_devices]).
double all_to_all_lower_bound(const TrafficMatrix& bytes, const std::vector<double>& bw);

/// The bound the network's own model obeys. kSerial: the busiest port's total holding time,
/// max over ports of sum of `network.transfer_seconds` of its off-diagonal non-zero
/// entries (latency and min-of-two-ports bandwidth included); >= the Aurora bound with the
/// devices' own bandwidths, and with mixed bandwidths unreachable by Aurora's b_max.
/// kFairShare: max over resources (a device's egress or ingress per link class) of bytes
/// through it / its bandwidth + the least latency of its flows: Aurora's b_max (Theorem
/// 5.2) per link class plus latency. Either way, with all ports idle and every transfer
/// ready at t, no order finishes before t + this. `bytes` must be
/// [network.num_devices()]^2, `traffic.num_devices` == network.num_devices() (asserted).
/// O(num_devices + entries) on the sparse form, the same value (bit for bit) from either form.
double port_load_lower_bound(const BigSwitchNetwork& network, const SparseTraffic& traffic);
double port_load_lower_bound(const BigSwitchNetwork& network, const TrafficMatrix& bytes);

/// Source-major order: i = 0.., and within a source j = 0.. (what a naive loop over
/// destinations sends). Leaves out the diagonal and zero entries. All ready at `ready_s`.
std::vector<Transfer> order_row_major(const SparseTraffic& traffic, double ready_s);
std::vector<Transfer> order_row_major(const TrafficMatrix& bytes, double ready_s);

/// The row-major transfers shuffled by Fisher-Yates with SplitMix64(`seed`): the same seed
/// gives the same order on every platform (and from either form).
std::vector<Transfer> order_random(const SparseTraffic& traffic, uint64_t seed, double ready_s);
std::vector<Transfer> order_random(const TrafficMatrix& bytes, uint64_t seed, double ready_s);

/// Shortest first by bytes, ties by (src, dst) ascending.
std::vector<Transfer> order_sjf(const SparseTraffic& traffic, double ready_s);
std::vector<Transfer> order_sjf(const TrafficMatrix& bytes, double ready_s);

/// Latest finish minus `now_s` (seconds) of finish times from `finish_times`; 0 when empty.
double makespan(const std::vector<double>& finish_s, double now_s);

}  // namespace muflow::transport
