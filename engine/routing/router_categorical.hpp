#pragma once
/// \file
/// The synthetic routers `uniform`, `harmoeny-skew`, `moeshard-multinomial` and
/// `exponential`: one fixed categorical distribution per block (router_distributions.hpp),
/// each token's k experts drawn from it without replacement (TopkSampler) with uniforms keyed
/// by (seed, block, request, position).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/routing/router_model.hpp"
#include "engine/routing/router_sampling.hpp"

namespace muflow::engine::routing {

/// A router with one categorical distribution per block (or one shared by all blocks).
/// Immutable; route() is thread-safe.
class CategoricalRouter final : public RouterModel {
 public:
  /// `samplers` has 1 entry (all blocks) or `num_layers` entries (one per block), each over
  /// `num_experts` experts.
  CategoricalRouter(int64_t num_experts, int64_t num_topk, int64_t num_layers, uint64_t seed,
                    std::vector<TopkSampler> samplers, std::string description);

  void route(int32_t block, int64_t request_id, int64_t position, int32_t* expert_ids,
             float* weights) const override;
  std::string describe() const override { return description_; }

  /// The distribution of `block` (the formula's p; what the tests compare against).
  const std::vector<double>& probabilities(int32_t block) const;

 private:
  uint64_t seed_;
  std::vector<TopkSampler> samplers_;
  std::string description_;
};

/// Builds `spec.kind` ∈ {uniform, harmoeny-skew, moeshard-multinomial, exponential}; the
/// arguments are already checked by make_router_model. Errors: the parameter errors of
/// router_distributions.hpp.
absl::StatusOr<std::unique_ptr<RouterModel>> make_categorical_router(const RouterSpec& spec,
                                                                     int64_t num_experts,
                                                                     int64_t num_topk,
                                                                     int64_t num_layers);

}  // namespace muflow::engine::routing
