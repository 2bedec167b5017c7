#pragma once
/// \file
/// The workers a driver lost and the ones that came back (#18 item 5): what the cluster driver
/// (cluster_driver.cpp) and its gate watcher share, and the back-off for a worker that comes
/// back and is lost again soon after.

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "actors/process_layout.hpp"

namespace muflow::actors::cluster {

/// Shared by a driver and its gate watcher (which may outlive a run's close by a moment: it
/// holds this, never the driver). Every field under `mu`. Process indices as in ClusterLayout
/// (worker i = process i + 1).
struct LostState {
  mutable std::mutex mu;
  std::set<uint32_t> processes;  ///< lost now (returned ones included until the next open)
  std::vector<ProcessGroup::LostWorker> list;  ///< every loss, in order (only grows)
  std::set<uint32_t> returned;  ///< lost, answered again: taken back by the next open
  std::vector<ProcessGroup::ReturnedWorker> returned_list;  ///< every return (only grows)
  /// [process]: when an open last tried to take it back. A worker lost again within kStayUp of
  /// that (it could not be joined, set up or started, or died soon after) is not tried again
  /// before `retry_after` (the wait doubles with each such failure: `failed_returns`), so a
  /// misconfigured or crashing worker does not make the engine replace its wiring every second.
  std::map<uint32_t, std::chrono::steady_clock::time_point> taken_back_at, retry_after;
  std::map<uint32_t, int> failed_returns;
};

/// How long a worker that was taken back must stay up for its back-off to start afresh.
inline constexpr std::chrono::seconds kStayUp{60};

/// Process `p` (named `name` in the log) was just lost; call with `s.mu` held. A worker taken
/// back less than kStayUp ago is not tried again for `interval` x 2^failures (at most 5 min;
/// logged); any other starts afresh.
void back_off_if_returned_lately(LostState& s, uint32_t p, std::chrono::milliseconds interval,
                                 const std::string& name);

}  // namespace muflow::actors::cluster
