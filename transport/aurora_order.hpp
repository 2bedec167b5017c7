#pragma once
/// \file
/// Aurora's contention-free all-to-all transmission orders on the big switch (Aurora §4.2,
/// Theorem 4.2, Algorithm 1, Appx. A Fig. 15; heterogeneous bandwidths §5.2, Theorem 5.2),
/// and the selector the engine uses to pick an order by name. Plain C++, no I/O, no globals:
/// the same inputs give the same list on every platform.
///
/// Both orders are built as a conflict-free *plan* (every port holds at most one planned
/// transfer at a time) and returned sorted by planned start. `BigSwitchNetwork` then serves
/// the list without backfill; served that way no transfer starts later than planned (see
/// `aurora_order.cpp`), so from idle ports the makespan is at most the plan's.

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/all_to_all_order.hpp"
#include "transport/big_switch_network.hpp"

namespace muflow::transport {

/// An order with what it is predicted to cost. Value type.
struct OrderPlan {
  /// Chunks to hand to `BigSwitchNetwork` in this order; all ready at the `ready_s` given.
  /// Per (src, dst) the chunks' bytes sum exactly to bytes[src][dst]; no chunk is on the
  /// diagonal or has 0 bytes.
  std::vector<Transfer> transfers;
  /// Makespan (seconds after `ready_s`) of `transfers` as `network.finish_times(transfers,
  /// ready_s)` serves them from the network's current port state (idle ports: the plan's).
  double predicted_s = 0.0;
  /// `port_load_lower_bound(network, bytes)` (seconds): no order beats it from idle ports.
  double lower_bound_s = 0.0;
  /// transfers.size(): every chunk pays the path latency once.
  int64_t num_chunks = 0;
  /// Rounds of the preemptive decomposition (weighted permutation matrices); 0 for unsplit.
  int64_t num_rounds = 0;
};

/// Preemptive contention-free order reaching the port-load bound (Aurora Theorem 4.2 / 5.2,
/// proof in Appx. A: pad the matrix so every row and column sums to the bound, then serve
/// one permutation at a time; the decomposition into permutations is Birkhoff-von Neumann).
///
/// `bytes`: [network.num_devices()]^2, entries >= 0 bytes, diagonal ignored (caller
/// invariants, MUFLOW_ASSERT; row and column sums must fit in int64). A pair may be split
/// into several chunks (consecutive rounds of one pair are merged into one chunk).
///
/// Guarantee, ports idle at `ready_s`: with zero-latency links the makespan equals
/// `port_load_lower_bound(network, bytes)` up to float rounding when every pair with traffic
/// has the same path bandwidth (the decomposition is then exact integer arithmetic in
/// bytes). With differing path bandwidths (mixed GPUs, intra- vs inter-node) it works in
/// integer time ticks of bound / 2^50 and rounds chunk boundaries to whole bytes, so a chain
/// of chunks may run late by one byte's time per chunk: makespan <= bound + num_rounds
/// bytes / (slowest path bandwidth) (no exact integer-byte schedule exists in general).
/// With latency every chunk pays it: makespan <= latency-free bound + num_rounds * (largest
/// path latency); compare `num_chunks` with the number of pairs to see the extra cost.
/// That cost is large for dense matrices: chunks grow like D^3 (random dense traffic on
/// 8-GPU nodes: 1,444 chunks at D = 16, 107,704 at D = 64), so at the presets' 2-5 us
/// latencies this order took 6x (D = 16) and 20x (D = 64) the bound where
/// `order_aurora_unsplit` stayed within 3%: use it when links have latency.
/// Cost O(D^4) worst case for D devices (about 16 ms at D = 64, 160 ms at D = 128, -O2).
OrderPlan order_aurora_preemptive(const BigSwitchNetwork& network, const TrafficMatrix& bytes,
                                  double ready_s);

/// Unsplit order, one transfer per pair (Aurora Algorithm 1, pattern of Fig. 15(b)): the
/// bottleneck device's transfers first, back to back; then, device by device in descending
/// order of remaining load (max of its egress and ingress holding time, latency included),
/// each of its unplaced transfers (busiest partner port first) at the earliest time both its
/// ports are free for its whole holding time. As a guard it also builds the dense priority list
/// schedule (same priority; any transfer whose two ports are free starts) and keeps the one with
/// the shorter plan (ties: Algorithm 1), so from idle ports makespan <= max over pairs of (load(src
/// egress) + load(dst ingress)) <= 2 * bound. Unsplit cannot reach the bound in general: deciding
/// whether a non-preemptive open shop meets it is NP-complete for three or more machines
/// (Gonzalez and Sahni, JACM 1976), while the bound takes O(D^2).
///
/// `bytes` as for `order_aurora_preemptive`. num_rounds is 0. Cost O(P^2) for P pairs.
OrderPlan order_aurora_unsplit(const BigSwitchNetwork& network, const TrafficMatrix& bytes,
                               double ready_s);

/// Aurora's order for this network: of `order_aurora_preemptive` and `order_aurora_unsplit`,
/// the plan with the shorter predicted makespan on `network` (latency and current port state
/// included; ties go to the unsplit plan, which has fewer chunks). With zero-latency links
/// that is the chunked plan whenever the unsplit one misses b_max, so it finishes in b_max;
/// with latency it avoids paying one latency per chunk when that costs more than the chunks
/// save. The chunked plan is not built when the unsplit one already meets the port-load
/// bound. Same arguments as the two; cost up to theirs combined.
OrderPlan order_aurora(const BigSwitchNetwork& network, const TrafficMatrix& bytes, double ready_s);

/// The all-to-all orders the engine can use.
enum class A2aOrder {
  kRowMajor,       ///< "row_major": `order_row_major`
  kRandom,         ///< "random": `order_random` with the caller's seed
  kSjf,            ///< "sjf": `order_sjf`
  kAurora,         ///< "aurora": `order_aurora` (the better of the next two)
  kAuroraChunked,  ///< "aurora_chunked": `order_aurora_preemptive`
  kAuroraUnsplit,  ///< "aurora_unsplit": `order_aurora_unsplit`
};

/// The order called `name` (exact, lower case: "row_major", "random", "sjf", "aurora",
/// "aurora_chunked", "aurora_unsplit"). Errors: InvalidArgument naming `name` and the accepted
/// names.
absl::StatusOr<A2aOrder> parse_a2a_order(std::string_view name);

/// The name `parse_a2a_order` accepts for `order` (static storage).
std::string_view a2a_order_name(A2aOrder order);

/// The transfers of `order` for `bytes` ([network.num_devices()]^2, entries >= 0), all
/// ready at `ready_s`; `seed` is used by kRandom only. Deterministic.
std::vector<Transfer> order_all_to_all(A2aOrder order, const BigSwitchNetwork& network,
                                       const TrafficMatrix& bytes, double ready_s, uint64_t seed);
/// The same from the sparse form (what the sim's collectives build): the row-major, random
/// and SJF orders read only its entries; Aurora's orders expand it to the dense matrix.
std::vector<Transfer> order_all_to_all(A2aOrder order, const BigSwitchNetwork& network,
                                       const SparseTraffic& traffic, double ready_s, uint64_t seed);

}  // namespace muflow::transport
