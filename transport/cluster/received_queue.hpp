#pragma once
/// \file
/// `ReceivedQueue`: a `DataPlane::Handler` that queues messages for a thread that waits for
/// them (a driver's setup steps, tests, benchmarks). Actors take messages from the handler
/// directly instead.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "transport/cluster/data_plane.hpp"

namespace muflow::transport::cluster {

/// Thread-safe FIFO of received messages. Must outlive the DataPlane its handler is given to.
class ReceivedQueue {
 public:
  /// The handler to give `DataPlane::create`: appends each message (progress thread).
  DataPlane::Handler handler() {
    return [this](Received&& r) {
      std::lock_guard<std::mutex> lock(mu_);
      q_.push_back(std::move(r));
      cv_.notify_all();
    };
  }
  /// The oldest message, waiting at most `timeout`; nullopt when none came. Any thread.
  std::optional<Received> pop(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !q_.empty(); })) return std::nullopt;
    Received r = std::move(q_.front());
    q_.pop_front();
    return r;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Received> q_;
};

}  // namespace muflow::transport::cluster
