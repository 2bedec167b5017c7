// HarMoEny's expert slots on the cpu backend (engine/exec/cpu_expert_slots.hpp): the copy worker
// brings an expert's prepacked weights into a slot, an expert computed from the slot gives
// the model's rows bitwise, and a copy waits for the compute that last used its slot.
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/exec/cpu_expert_slots.hpp"
#include "engine/exec/cpu_model.hpp"
#include "engine/model/synthetic_model.hpp"
#include "kernels/reference/test_inputs.hpp"

namespace muflow::engine {
namespace {

model::ModelConfig slots_model() {
  model::ModelConfig c;
  c.vocab_size = 50;
  c.hidden_size = 48;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 24;
  c.num_experts = 4;
  c.num_topk = 1;
  c.expert_ffn = 40;
  return c;
}

std::shared_ptr<const exec::CpuModel> prepared(model::DType dtype) {
  auto weights = std::make_shared<const model::ModelWeights>(
      model::make_synthetic_model(slots_model(), 9, dtype));
  auto model = exec::CpuModel::prepare(weights);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

// 37 rows: several row tiles and a remainder (both primitives of every Linear).
TEST(CpuExpertSlots, ExpertFromASlotIsBitwiseTheModelsExpert) {
  for (model::DType dtype : {model::DType::kF32, model::DType::kBF16}) {
    const auto model = prepared(dtype);
    ASSERT_NE(model, nullptr);
    kernels::reference::SplitMix64 rng(3);
    const int64_t n = 37, h = slots_model().hidden_size;
    const std::vector<float> x = kernels::reference::random_floats(rng, n * h, -1.f, 1.f);
    exec::CpuExpertSlots slots(model, 2);
    EXPECT_EQ(slots.num_slots(), 2);
    for (int64_t block = 0; block < 2; ++block) {
      for (int64_t e = 0; e < 4; ++e) {
        const int64_t slot = e % 2;
        slots.fetch(slot, block, e, {}).wait();
        std::vector<float> want(n * h), got(n * h, -1.f);
        model->expert(block, e, x.data(), n, want.data());
        slots.forward(slot, block, e, x.data(), n, got.data());
        EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
            << "block " << block << " expert " << e
            << (dtype == model::DType::kBF16 ? " bf16" : "");
      }
    }
    EXPECT_EQ(slots.copies(), 8);
  }
}

// The worker serves copies in order, each only after the event it waits on.
TEST(CpuExpertSlots, ACopyWaitsForItsSlotsPreviousUser) {
  const auto model = prepared(model::DType::kF32);
  ASSERT_NE(model, nullptr);
  exec::CpuExpertSlots slots(model, 1);
  std::promise<void> previous_user_done;
  std::shared_future<void> first = slots.fetch(0, 0, 1, previous_user_done.get_future().share());
  std::shared_future<void> second = slots.fetch(0, 1, 2, {});  // queued behind the first
  EXPECT_EQ(first.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  EXPECT_EQ(second.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  EXPECT_EQ(slots.copies(), 0);
  previous_user_done.set_value();
  second.wait();
  EXPECT_EQ(first.wait_for(std::chrono::milliseconds(0)), std::future_status::ready);
  EXPECT_EQ(slots.copies(), 2);
}

// Destroying the slots finishes the copies already asked for (no hang, no lost copy).
TEST(CpuExpertSlots, DestructorFinishesQueuedCopies) {
  const auto model = prepared(model::DType::kF32);
  ASSERT_NE(model, nullptr);
  std::shared_future<void> last;
  {
    exec::CpuExpertSlots slots(model, 3);
    for (int64_t i = 0; i < 12; ++i) last = slots.fetch(i % 3, i % 2, i % 4, {});
  }
  EXPECT_EQ(last.wait_for(std::chrono::milliseconds(0)), std::future_status::ready);
}

}  // namespace
}  // namespace muflow::engine
