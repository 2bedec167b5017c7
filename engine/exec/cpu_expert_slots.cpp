#include "engine/exec/cpu_expert_slots.hpp"

#include <algorithm>
#include <cstdlib>

#include "kernels/assert.hpp"

namespace muflow::engine::exec {

CpuExpertSlots::CpuExpertSlots(std::shared_ptr<const CpuModel> model, int64_t num_slots)
    : model_(std::move(model)) {
  MUFLOW_ASSERT(num_slots >= 0, "CpuExpertSlots: negative slot count");
  const model::ModelConfig& c = model_->config();
  std::size_t bytes = 64;
  for (int64_t b = 0; b < c.num_layers; ++b) {
    for (int64_t e = 0; e < c.num_experts; ++e) {
      bytes = std::max(bytes, model_->expert_ffn(b, e).packed_bytes());
    }
  }
  bytes = (bytes + 63) / 64 * 64;
  slots_.resize(static_cast<std::size_t>(num_slots));
  for (Slot& s : slots_) {
    s.data = kernels::cpu::allocate_weights(bytes);
    MUFLOW_ASSERT(s.data != nullptr, "CpuExpertSlots: out of memory for a slot");
  }
  worker_ = std::thread([this] { work(); });
}

CpuExpertSlots::~CpuExpertSlots() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

std::shared_future<void> CpuExpertSlots::fetch(int64_t slot, int64_t block, int64_t expert,
                                               std::shared_future<void> after) {
  MUFLOW_ASSERT(slot >= 0 && slot < num_slots(), "CpuExpertSlots::fetch: slot out of range");
  const model::ModelConfig& c = model_->config();
  MUFLOW_ASSERT(block >= 0 && block < c.num_layers && expert >= 0 && expert < c.num_experts,
                "CpuExpertSlots::fetch: expert out of range");
  Job job{slot, block, expert, std::move(after), {}};
  std::shared_future<void> done = job.done.get_future().share();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
  return done;
}

void CpuExpertSlots::work() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stop_, and every copy asked for is done
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    if (job.after.valid()) job.after.wait();  // the slot's previous user finished
    Slot& s = slots_[static_cast<std::size_t>(job.slot)];
    model_->expert_ffn(job.block, job.expert).copy_packed(s.data.get());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      s.block = job.block;
      s.expert = job.expert;
      ++copies_;
    }
    job.done.set_value();
  }
}

void CpuExpertSlots::forward(int64_t slot, int64_t block, int64_t expert, const float* x,
                             int64_t n, float* y) const {
  MUFLOW_ASSERT(slot >= 0 && slot < num_slots(), "CpuExpertSlots::forward: slot out of range");
  const Slot& s = slots_[static_cast<std::size_t>(slot)];
  {
    std::lock_guard<std::mutex> lock(mutex_);
    MUFLOW_ASSERT(s.block == block && s.expert == expert,
                  "CpuExpertSlots::forward: the slot does not hold this expert (fetch first)");
  }
  model_->expert_ffn(block, expert).forward_packed(s.data.get(), x, n, y);
}

int64_t CpuExpertSlots::copies() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return copies_;
}

}  // namespace muflow::engine::exec
