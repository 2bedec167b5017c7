#pragma once
/// \file
/// Devices' busy intervals of one run, written by its stage actors as each run ends and taken
/// by the run's coordinator into its MetricsRecorder (engine/serving/metrics.hpp,
/// `on_device_busy`), instead of one `busy` message per stage run (#19 item 6: about one
/// message in six after direct starts, actors/device_gate.hpp).
///
/// Only where the coordinator lives in the stages' process (`RunContext::busy_log` set by the
/// code that spawns it); stages of a worker process report with `busy` messages as before.
/// Order: a stage adds its interval before it sends the outputs of that run, and the
/// coordinator takes the log before it reads busy time (each sampler report, each compaction,
/// a summary), so every interval of the runs behind what it has seen is counted, as the
/// message order guaranteed before.
///
/// Threads: every method takes one mutex (cpu stages run on CAF's worker threads). Memory:
/// what was added since the last `take`: the stage runs of about one iteration.

#include <cstdint>
#include <mutex>
#include <vector>

namespace muflow::actors {

class BusyLog {
 public:
  /// One stage run's busy interval.
  struct Interval {
    int64_t device = 0;
    double begin_s = 0, end_s = 0;  ///< seconds since the run's t0
  };
  /// A stage actor, at the end of a run on `device` (in [0, devices): checked by the recorder).
  void add(int64_t device, double begin_s, double end_s) {
    std::lock_guard<std::mutex> lock(mutex_);
    added_.push_back({device, begin_s, end_s});
  }
  /// The coordinator: every interval added since the last call, in the order added.
  std::vector<Interval> take() {
    std::vector<Interval> out;
    std::lock_guard<std::mutex> lock(mutex_);
    out.swap(added_);
    return out;
  }

 private:
  std::mutex mutex_;
  std::vector<Interval> added_;
};

}  // namespace muflow::actors
