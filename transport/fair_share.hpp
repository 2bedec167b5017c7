#pragma once
/// \file
/// Max-min fair bandwidth sharing between concurrent flows: the flow-level network model of
/// network simulators such as SimGrid (Velho, Schnorr, Casanova & Legrand, "On the validity
/// of flow-level TCP network models for grid and cloud simulations", ACM TOMACS 23(4), 2013,
/// §2: "max-min fairness"; computed by progressive filling, Bertsekas & Gallager, "Data
/// Networks", 2nd ed., §6.5.2). Plain C++, no CAF, deterministic: the same calls give
/// bit-identical times.
///
/// Model. Links are resources with a capacity (bytes/s, > 0, +infinity allowed). A flow moves
/// `bytes` over exactly two resources (its sender's egress and its receiver's ingress on the
/// big switch), from `ready_s`; at every instant the active flows get the max-min fair
/// rates (progressive filling: raise every unfrozen flow's rate equally until a resource is
/// full, freeze the flows through it, repeat). Rates are recomputed only when a flow becomes
/// ready, a flow drains, or the capacity earlier calls committed changes (event driven). A
/// flow finishes `latency_s` after its last byte left.
///
/// Calls and commitment. The sim promises a transfer's arrival time when it is sent (the
/// receiver's message is scheduled for that virtual time), so a later call cannot slow an
/// earlier one down: flows handed in by ONE call share max-min fairly among themselves, on
/// the capacity that the flows of earlier calls left (their rate profiles are committed).
/// A barrier all-to-all is one call, so its flows are exactly max-min fair; point-to-point
/// sends of separate calls get first-come priority. Either way every resource is
/// work-conserving (no capacity idles while a flow through it waits).
///
/// Cost: O(E · (R + F)) per call, E events (distinct ready and drain times, plus commitment
/// changes), R resources touched, F flows of the call.

#include <cstdint>
#include <vector>

namespace muflow::transport {

/// One flow: `bytes` (> 0) over resources `up` and `down` (indices < num_resources, may be
/// equal), ready at `ready_s` (seconds), finishing `latency_s` (>= 0) after its last byte.
struct FairShareFlow {
  int32_t up = 0;
  int32_t down = 0;
  double bytes = 0.0;
  double ready_s = 0.0;
  double latency_s = 0.0;
};

/// Resources with committed rate profiles. Value type; not thread-safe: owned by one
/// BigSwitchNetwork (one actor of the sim backend, or a test). Arguments come from the
/// engine and are checked with MUFLOW_ASSERT.
class FairShareLinks {
 public:
  FairShareLinks() = default;
  /// `capacity_bytes_per_s`: [num_resources], each > 0 (+infinity: never a bottleneck).
  explicit FairShareLinks(std::vector<double> capacity_bytes_per_s);

  int32_t num_resources() const { return static_cast<int32_t>(capacity_.size()); }

  /// Finish times (seconds) of `flows` [F] sharing the resources max-min fairly among
  /// themselves on the capacity committed flows leave. Pure. Result [F], in input order.
  std::vector<double> finish_times(const std::vector<FairShareFlow>& flows) const;

  /// As `finish_times`, then commits the flows' rate profiles, so later calls see less
  /// capacity while they run. Forgets committed profiles that ended by the call's earliest
  /// ready time (calls are expected in non-decreasing time, as virtual time runs; an earlier
  /// call would see the forgotten capacity as free).
  std::vector<double> schedule(const std::vector<FairShareFlow>& flows);

  /// Bytes/s that committed flows use on `resource` at time `t_s`.
  double committed_rate(int32_t resource, double t_s) const;

  /// Forgets every committed flow.
  void reset();

 private:
  /// A flow's constant rate (bytes/s) over [start_s, end_s).
  struct Segment {
    double start_s = 0.0;
    double end_s = 0.0;
    double rate = 0.0;
  };

  /// The event-driven solve; appends each flow's rate segments to `profile` ([F], optional).
  std::vector<double> solve(const std::vector<FairShareFlow>& flows,
                            std::vector<std::vector<Segment>>* profile) const;
  /// Capacity of `resource` left at `t_s` by committed flows (>= 0).
  double residual(int32_t resource, double t_s) const;
  /// The first time after `t_s` at which committed use of `resource` changes (+inf: never).
  double next_change(int32_t resource, double t_s) const;

  std::vector<double> capacity_;
  std::vector<std::vector<Segment>> committed_;  ///< [num_resources]
};

}  // namespace muflow::transport
