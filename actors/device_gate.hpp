#pragma once
/// \file
/// Who runs on one device now, shared by its device actor and its stage actors, so that a
/// stage can start at once when its device is idle and nothing is waiting for it, without the
/// ready → grant round trip through the device actor, and can end a run without `done` when
/// nothing is waiting afterwards (#19 item 6: three of a stage run's nine messages; on the cpu
/// backend two thread hand-offs fewer between a batch's arrival and its run).
///
/// The device actor still decides every contested grant: a stage starts directly only when
/// the device holds no queued stage and no `ready` is on its way to it, which is exactly when
/// the device actor, receiving that stage's `ready`, would grant it (every scheduling policy
/// picks the only queued stage). A topology with a batch hold (`scheduler.hold_min_tokens` on
/// a wiring whose graph holds batches) holds even a lone stage back, so there every start
/// goes through the device actor (`direct_start` false).
///
/// Ownership and threads: one per device of this process, made with its device actor
/// (actors/graph_builder.cpp) and reached by the stages through `ActorTable::device_gates`;
/// every method takes one mutex (stage actors of the cpu backend run on CAF's worker threads;
/// the sim runs them all on one thread, where the lock is uncontended).

#include <cstdint>
#include <mutex>

namespace muflow::actors {

class DeviceGate {
 public:
  explicit DeviceGate(bool direct_start) : direct_start_(direct_start) {}

  /// A stage that has tokens ready and no message waiting in its mailbox: true = the device
  /// was idle with no stage queued and no `ready` in flight, and the caller now holds it (it
  /// runs at once and ends with `finish_run`). False = the caller must send `ready` to the
  /// device actor, which is counted as in flight until `on_ready`.
  bool try_start() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (direct_start_ && !held_ && in_flight_ == 0 && queued_ == 0) {
      held_ = true;
      return true;
    }
    ++in_flight_;
    return false;
  }
  /// A stage about to send `ready` without trying to start (a message waits in its mailbox,
  /// which the device actor's grant would have let it take into the same run).
  void announce() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++in_flight_;
  }
  /// Device actor, after applying a `ready`: it arrived; `queued` = stages it now holds queued.
  void on_ready(int64_t queued) {
    std::lock_guard<std::mutex> lock(mutex_);
    --in_flight_;
    queued_ = queued;
  }
  /// Device actor: the number of stages it holds queued changed (a grant took one).
  void set_queued(int64_t queued) {
    std::lock_guard<std::mutex> lock(mutex_);
    queued_ = queued;
  }
  /// Device actor, before choosing a stage to grant: true = the device was free and the device
  /// actor now holds it for the grant (`release` if its policy then picks none).
  bool hold() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (held_) return false;
    held_ = true;
    return true;
  }
  /// Device actor, on `done` (or a hold its policy did not use): the device is free;
  /// `queued` = stages it holds queued.
  void release(int64_t queued) {
    std::lock_guard<std::mutex> lock(mutex_);
    held_ = false;
    queued_ = queued;
  }
  /// The stage that holds the device, at the end of its run: true = nothing is queued, in
  /// flight or (`has_ready`) left on this stage, and the device is free again without a
  /// message; false = the caller must send `done` (the device actor then releases it and
  /// grants the next stage).
  bool finish_run(bool has_ready) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (has_ready || in_flight_ != 0 || queued_ != 0) return false;
    held_ = false;
    return true;
  }

 private:
  std::mutex mutex_;
  const bool direct_start_;
  bool held_ = false;      ///< a stage runs (or the device actor is granting one)
  int64_t in_flight_ = 0;  ///< `ready` messages sent and not yet applied by the device actor
  int64_t queued_ = 0;     ///< stages the device actor holds queued (queued_tokens > 0)
};

}  // namespace muflow::actors
