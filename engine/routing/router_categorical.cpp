#include "engine/routing/router_categorical.hpp"

#include "absl/strings/str_format.h"
#include "engine/routing/router_distributions.hpp"
#include "kernels/assert.hpp"

namespace muflow::engine::routing {

CategoricalRouter::CategoricalRouter(int64_t num_experts, int64_t num_topk, int64_t num_layers,
                                     uint64_t seed, std::vector<TopkSampler> samplers,
                                     std::string description)
    : RouterModel(num_experts, num_topk, num_layers),
      seed_(seed),
      samplers_(std::move(samplers)),
      description_(std::move(description)) {
  MUFLOW_ASSERT(samplers_.size() == 1 || static_cast<int64_t>(samplers_.size()) == num_layers,
                "one sampler, or one per block");
}

const std::vector<double>& CategoricalRouter::probabilities(int32_t block) const {
  MUFLOW_ASSERT(block >= 0 && block < num_layers(), "block out of range");
  return samplers_.size() == 1 ? samplers_[0].probabilities()
                               : samplers_[static_cast<size_t>(block)].probabilities();
}

void CategoricalRouter::route(int32_t block, int64_t request_id, int64_t position,
                              int32_t* expert_ids, float* weights) const {
  MUFLOW_ASSERT(block >= 0 && block < num_layers(), "block out of range");
  const TopkSampler& s =
      samplers_.size() == 1 ? samplers_[0] : samplers_[static_cast<size_t>(block)];
  s.draw(seed_, router_token_key(block, request_id, position), num_topk(), expert_ids, weights);
}

absl::StatusOr<std::unique_ptr<RouterModel>> make_categorical_router(const RouterSpec& spec,
                                                                     int64_t num_experts,
                                                                     int64_t num_topk,
                                                                     int64_t num_layers) {
  const int64_t e = num_experts;
  std::vector<TopkSampler> samplers;
  std::string desc;
  if (spec.kind == "uniform") {
    samplers.emplace_back(uniform_probabilities(e));
    desc = absl::StrFormat("uniform(E=%d, k=%d, seed=%d)", e, num_topk, spec.seed);
  } else if (spec.kind == "harmoeny-skew") {
    const int64_t hot = spec.hot_experts > 0 ? spec.hot_experts : 1;
    absl::StatusOr<std::vector<double>> p =
        harmoeny_skew_probabilities(e, hot, spec.skew, spec.skew_mode);
    if (!p.ok()) return p.status();
    const double share = (*p)[0] * static_cast<double>(hot);
    samplers.emplace_back(*std::move(p));
    desc =
        absl::StrFormat("harmoeny-skew(E=%d, k=%d, hot=%d, s=%g, mode=%s, hot share=%.4g, seed=%d)",
                        e, num_topk, hot, spec.skew, spec.skew_mode, share, spec.seed);
  } else if (spec.kind == "moeshard-multinomial") {
    const int64_t hot = spec.hot_experts > 0 ? spec.hot_experts : (e + 9) / 10;  // ⌈0.1·E⌉
    absl::StatusOr<std::vector<double>> p = moeshard_probabilities(e, hot, spec.alpha);
    if (!p.ok()) return p.status();
    const double share = (*p)[0] * static_cast<double>(hot);
    samplers.emplace_back(*std::move(p));
    desc = absl::StrFormat(
        "moeshard-multinomial(E=%d, k=%d, hot=%d, alpha=%g, hot share=%.4g, seed=%d)", e, num_topk,
        hot, spec.alpha, share, spec.seed);
  } else if (spec.kind == "exponential") {
    const double rate = spec.exp_rate < 0.0 ? 2.0 / static_cast<double>(e) : spec.exp_rate;
    for (int64_t b = 0; b < num_layers; ++b) {
      absl::StatusOr<std::vector<double>> p = exponential_probabilities(
          rate, exponential_popularity_order(e, spec.seed, static_cast<int32_t>(b)));
      if (!p.ok()) return p.status();
      samplers.emplace_back(*std::move(p));
    }
    desc = absl::StrFormat("exponential(E=%d, k=%d, lambda=%g, seed=%d)", e, num_topk, rate,
                           spec.seed);
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("router '%s' is not a categorical router", spec.kind));
  }
  return std::make_unique<CategoricalRouter>(e, num_topk, num_layers, spec.seed,
                                             std::move(samplers), std::move(desc));
}

}  // namespace muflow::engine::routing
