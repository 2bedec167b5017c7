#pragma once
/// \file
/// A stream of requests in arrival order, produced as the coordinator takes them. A long
/// workload (a Poisson load of up to kMaxWorkloadRequests, a long trace) then costs memory for
/// the requests that arrived and are unfinished, not for every request of the run: what keeps
/// `muflow run`'s memory flat when the offered load is far above capacity (issue #15).

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/serving/request.hpp"

namespace muflow::engine::serving {

/// Yields requests by non-decreasing arrival_s (seconds since the run's start). The workload
/// sources number them 0, 1, 2, ...; the coordinator gives each the next id of its run anyway
/// (a list checked by Server::run keeps its own ids). A request that arrives earlier than one
/// yielded before it is admitted as soon as it is taken (its arrival lies in the past).
///
/// Single owner: the coordinator actor pulls from it (one thread at a time; no locking).
/// Deterministic: the same source built from the same inputs yields the same requests.
class RequestSource {
 public:
  virtual ~RequestSource() = default;
  /// Requests not yet yielded.
  virtual int64_t remaining() const = 0;
  /// The next request; nullopt once remaining() is 0.
  virtual std::optional<Request> next() = 0;
};
using RequestSourcePtr = std::shared_ptr<RequestSource>;

/// A source over requests built already, yielded in the given order with their ids as given
/// (make_requests gives ids 0..n-1 by arrival; Server::run sorts a host's list by arrival and
/// keeps its ids). Holds the requests until each is yielded (moved out). Never fails.
RequestSourcePtr make_vector_source(std::vector<Request> requests);

}  // namespace muflow::engine::serving
