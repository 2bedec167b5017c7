#include "engine/routing/router_distributions.hpp"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "engine/splitmix64.hpp"

namespace muflow::engine::routing {
namespace {


}  // namespace

std::vector<double> uniform_probabilities(int64_t num_experts) {
  return std::vector<double>(static_cast<size_t>(num_experts),
                             1.0 / static_cast<double>(num_experts));
}

absl::StatusOr<std::vector<double>> harmoeny_skew_probabilities(int64_t num_experts,
                                                                int64_t hot_experts, double skew,
                                                                std::string_view mode) {
  const int64_t e = num_experts;
  const int64_t k = hot_experts;
  if (!(skew >= 0.0 && skew <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("router harmoeny-skew: skew must be in [0, 1], got %g", skew));
  }
  if (k < 1 || k >= e) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "router harmoeny-skew: hot_experts must be in [1, %d) (num_experts %d), got %d", e, e, k));
  }
  double p_hot = 0.0;
  if (mode == "code") {
    if (e <= 2 * k) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "router harmoeny-skew: skew_mode 'code' needs num_experts > 2 * hot_experts "
          "(HarMoEny's formula divides by E - 2k), got E=%d, k=%d; use skew_mode 'share'",
          e, k));
    }
    p_hot = std::min(1.0 / static_cast<double>(k),
                     (static_cast<double>(e) * skew + static_cast<double>(k)) /
                         (static_cast<double>(k) * static_cast<double>(e - 2 * k)));
  } else if (mode == "share") {
    p_hot = skew / static_cast<double>(k);
  } else {
    return absl::InvalidArgumentError(absl::StrFormat(
        "router harmoeny-skew: skew_mode must be 'code' or 'share', got '%s'", std::string(mode)));
  }
  const double p_cold =
      std::max(0.0, 1.0 - static_cast<double>(k) * p_hot) / static_cast<double>(e - k);
  std::vector<double> p(static_cast<size_t>(e), p_cold);
  for (int64_t i = 0; i < k; ++i) p[static_cast<size_t>(i)] = p_hot;
  return p;
}

absl::StatusOr<std::vector<double>> moeshard_probabilities(int64_t num_experts, int64_t hot_experts,
                                                           double alpha) {
  if (!(alpha >= 0.0 && std::isfinite(alpha))) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "router moeshard-multinomial: alpha must be a finite number >= 0, got %g", alpha));
  }
  if (hot_experts < 0 || hot_experts > num_experts) {
    return absl::InvalidArgumentError(
        absl::StrFormat("router moeshard-multinomial: hot_experts must be in [0, %d], got %d",
                        num_experts, hot_experts));
  }
  const double base = 1.0 / static_cast<double>(num_experts);
  const double total = 1.0 + static_cast<double>(hot_experts) * alpha;
  std::vector<double> p(static_cast<size_t>(num_experts), base / total);
  for (int64_t i = 0; i < hot_experts; ++i) p[static_cast<size_t>(i)] = (base + alpha) / total;
  return p;
}

absl::StatusOr<std::vector<double>> exponential_probabilities(
    double exp_rate, const std::vector<int32_t>& popularity_order) {
  if (!(exp_rate >= 0.0 && std::isfinite(exp_rate))) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "router exponential: exp_rate must be a finite number >= 0, got %g", exp_rate));
  }
  const size_t n = popularity_order.size();
  std::vector<double> p(n, -1.0);
  double total = 0.0;
  for (size_t r = 0; r < n; ++r) {
    const int32_t e = popularity_order[r];
    if (e < 0 || static_cast<size_t>(e) >= n || p[static_cast<size_t>(e)] >= 0.0) {
      return absl::InvalidArgumentError(
          "router exponential: popularity order is not a permutation of the experts");
    }
    // exp(-λ·r) underflows to 0 only for λ·r > ~745; such experts are never drawn.
    p[static_cast<size_t>(e)] = std::exp(-exp_rate * static_cast<double>(r));
    total += p[static_cast<size_t>(e)];
  }
  for (double& v : p) v /= total;
  return p;
}

std::vector<int32_t> exponential_popularity_order(int64_t num_experts, uint64_t seed,
                                                  int32_t block) {
  std::vector<int32_t> order(static_cast<size_t>(num_experts));
  for (int64_t i = 0; i < num_experts; ++i) order[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  SplitMix64 rng(seed ^ splitmix64_mix(static_cast<uint64_t>(static_cast<int64_t>(block))));
  for (int64_t i = num_experts - 1; i > 0; --i) {
    const int64_t j = rng.uniform_int(0, i);
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

}  // namespace muflow::engine::routing
