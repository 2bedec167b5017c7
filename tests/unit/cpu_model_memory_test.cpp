// #15 weights memory: a prepared CpuModel keeps only its prepacked copies, so once its users
// drop the loaded weights they are freed, and the model computes exactly as before.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/exec/cpu_model.hpp"
#include "engine/model/synthetic_model.hpp"
#include "engine/topology/topology.hpp"

namespace muflow::engine {
namespace {

TEST(CpuModelMemory, PreparedModelHoldsNoReferenceToTheLoadedWeights) {
  for (model::DType dtype : {model::DType::kF32, model::DType::kBF16}) {
    const model::ModelConfig c = topology::default_synthetic_config();
    auto weights = std::make_shared<const model::ModelWeights>(
        model::make_synthetic_model(c, /*seed=*/5, dtype));
    std::weak_ptr<const model::ModelWeights> watch = weights;
    absl::StatusOr<std::shared_ptr<const exec::CpuModel>> prepared =
        exec::CpuModel::prepare(weights);
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    // The same inputs through the model while the weights are alive and after they are gone.
    std::vector<float> x(3 * c.hidden_size);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * static_cast<float>(i % 17) - 0.05f;
    std::vector<float> y_before(x.size()), logits_before(3 * c.vocab_size);
    (*prepared)->expert(1, 2, x.data(), 3, y_before.data());
    (*prepared)->logits(x.data(), 3, logits_before.data());

    weights.reset();
    EXPECT_TRUE(watch.expired()) << "CpuModel keeps the loaded weights alive";
    std::vector<float> y_after(x.size()), logits_after(3 * c.vocab_size);
    (*prepared)->expert(1, 2, x.data(), 3, y_after.data());
    (*prepared)->logits(x.data(), 3, logits_after.data());
    EXPECT_EQ(y_after, y_before);
    EXPECT_EQ(logits_after, logits_before);
    EXPECT_EQ((*prepared)->config().hidden_size, c.hidden_size);
  }
}

}  // namespace
}  // namespace muflow::engine
