#pragma once
/// \file
/// HarMoEny's expert slots on the cpu backend (§4.3): a device's slot buffers and the copy
/// worker that brings a foreign expert's prepacked weights into a slot while other experts
/// compute. The cpu counterpart of the sim's PCIe copy model (transport/big_switch_network)
/// and of a CUDA copy stream: copies run on one worker thread, in the order they were asked
/// for, each after the event it waits on (the compute that last used its slot).
///
/// Home experts keep their weights in the model (host memory stands in for device memory), so
/// a slot buffer only ever holds fetched experts; HarMoEny's restores of overwritten home
/// experts are counted by the plan (engine/planning/harmoeny_slots.hpp) but need no copy here.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/exec/cpu_model.hpp"
#include "kernels/cpu/weight_memory.hpp"

namespace muflow::engine::exec {

/// The slots of one device. Thread safety: `fetch`, `forward` and `copies` may be called from
/// any thread (the stage actors of that device, one at a time); the worker thread is owned
/// here and joined by the destructor (after finishing the copies already asked for).
class CpuExpertSlots {
 public:
  /// `num_slots` buffers, each large enough for any expert of `model` (the largest
  /// ExpertFfn::packed_bytes), 64-byte aligned. num_slots >= 0.
  CpuExpertSlots(std::shared_ptr<const CpuModel> model, int64_t num_slots);
  ~CpuExpertSlots();
  CpuExpertSlots(const CpuExpertSlots&) = delete;
  CpuExpertSlots& operator=(const CpuExpertSlots&) = delete;

  /// Asks the worker to copy expert (`block`, `expert`)'s prepacked weights into `slot`
  /// once `after` is ready (an invalid future = at once), behind the copies asked for
  /// earlier. Returns the event of the copy's completion. slot ∈ [0, num_slots), block and
  /// expert in range (asserted).
  std::shared_future<void> fetch(int64_t slot, int64_t block, int64_t expert,
                                 std::shared_future<void> after);

  /// y[n, hidden] = expert (`block`, `expert`) of x[n, hidden], computed from the weights in
  /// `slot` (which must hold that expert: the caller waited on its fetch). Bitwise the same
  /// rows as CpuModel::expert.
  void forward(int64_t slot, int64_t block, int64_t expert, const float* x, int64_t n,
               float* y) const;

  int64_t num_slots() const { return static_cast<int64_t>(slots_.size()); }
  /// Copies the worker has completed so far.
  int64_t copies() const;

 private:
  struct Job {
    int64_t slot, block, expert;
    std::shared_future<void> after;
    std::promise<void> done;
  };
  struct Slot {
    kernels::cpu::WeightMemory data;  ///< 64-byte aligned, huge pages where the OS allows
    int64_t block = -1, expert = -1;  ///< what it holds (for the forward check)
  };
  void work();

  std::shared_ptr<const CpuModel> model_;
  std::vector<Slot> slots_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool stop_ = false;
  int64_t copies_ = 0;
  std::thread worker_;
};

}  // namespace muflow::engine::exec
