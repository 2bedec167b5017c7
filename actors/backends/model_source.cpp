#include "actors/backends/model_source.hpp"

#include "absl/strings/str_format.h"
#include "engine/model/model_loader.hpp"
#include "engine/model/model_memory.hpp"
#include "engine/model/synthetic_model.hpp"

namespace muflow::actors {

absl::StatusOr<std::shared_ptr<const engine::model::ModelWeights>> load_model_weights(
    const engine::topology::Topology& topology, double prepared_copies) {
  if (!topology.model.path.empty()) return engine::model::load_hf_model(topology.model.path);
  if (!topology.model.synthetic) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: [model] needs either 'path' or synthetic dims", topology.source));
  }
  if (absl::Status s = topology.model.synthetic->validate(); !s.ok()) return s;
  const engine::model::DType dtype =
      topology.model.dtype == "bf16" ? engine::model::DType::kBF16 : engine::model::DType::kF32;
  // The weights and their prepared copy, before either is built.
  if (absl::Status s = engine::model::check_weights_fit_in_memory(
          *topology.model.synthetic, dtype == engine::model::DType::kBF16 ? 2.0 : 4.0,
          prepared_copies, topology.source + ": [model]");
      !s.ok()) {
    return s;
  }
  return std::make_shared<const engine::model::ModelWeights>(
      engine::model::make_synthetic_model(*topology.model.synthetic, topology.model.seed, dtype));
}

}  // namespace muflow::actors
