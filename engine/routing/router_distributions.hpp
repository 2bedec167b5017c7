#pragma once
/// \file
/// The per-token expert distributions of the synthetic routers (issue 3 item 5). Each
/// returns p[0..E) (sums to 1); the routers draw a token's first expert from p and its other
/// k−1 experts from p without replacement (TopkSampler). Pure functions.

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace muflow::engine::routing {

/// `uniform`: p_i = 1/E. Every set of k distinct experts is equally likely.
std::vector<double> uniform_probabilities(int64_t num_experts);

/// `harmoeny-skew`: k_hot hot experts (ids 0..k_hot-1) share a fraction of the tokens.
///
/// Source: HarMoEny (sacs-epfl/HarMoEny) §3 routes "90% of tokens to 10 experts"; its
/// generator (facts in ../shared/seeds/NOTES.md) assigns a batch of N tokens as
///   n_hot  = min(N/k, ⌊(E·N·s + k·N) / (k·(E − 2k))⌋) tokens to each of the k hot experts,
///   n_cold = ⌊(N − k·n_hot) / (E − k)⌋ to each other expert, the remainder to the lowest ids.
/// A router decides per token, so this takes the limit N → ∞ (floors and the remainder,
/// < E tokens per batch, vanish) and turns counts into per-token probabilities:
///   mode "code":  p_hot  = min(1/k, (E·s + k) / (k·(E − 2k)))   for i < k,
///                 p_cold = (1 − k·p_hot) / (E − k)               otherwise.
///   (k = 1: the hot share is (E·s + 1)/(E − 2) ≈ s; for k > 1 the hot share k·p_hot is not
///   s: with E = 128, k = 10, s = 0.9 it caps at 1, all tokens hot. Requires E > 2k.)
///   mode "share": p_hot = s/k for i < k, p_cold = (1 − s)/(E − k): exactly the fraction s to
///   the hot experts, which is how the paper describes its §3 setup (s = 0.9, k = 10).
/// HarMoEny's experiments route top-1; for k > 1 the routers draw the other experts from the
/// same p without replacement.
/// Errors: InvalidArgument for s ∉ [0, 1], k_hot ∉ [1, E), a mode other than code/share,
/// or mode "code" with E ≤ 2·k_hot.
absl::StatusOr<std::vector<double>> harmoeny_skew_probabilities(int64_t num_experts,
                                                                int64_t hot_experts, double skew,
                                                                std::string_view mode);

/// `moeshard-multinomial`: p_i ∝ 1/E + α for i < k_hot, p_i ∝ 1/E otherwise, i.e.
/// p_hot = (1/E + α)/(1 + k_hot·α), p_cold = (1/E)/(1 + k_hot·α).
/// Source: MoEShard (sacs-epfl/moe-inference; ../shared/seeds/NOTES.md): a multinomial with
/// replacement over these weights, paper defaults α = 0.6 and k_hot = ⌈0.1·E⌉. Its top-1
/// draw is the same; for k > 1 the routers draw without replacement (distinct experts).
/// Errors: InvalidArgument for α < 0 or k_hot ∉ [0, E].
absl::StatusOr<std::vector<double>> moeshard_probabilities(int64_t num_experts, int64_t hot_experts,
                                                           double alpha);

/// `exponential`: p_e ∝ exp(−λ·rank(e)), rank(e) ∈ [0, E) the popularity rank of expert e
/// (0 = most popular) given by `popularity_order` (order[r] = the expert of rank r).
/// Source: AsyncMoE (Wang et al., "Toward Cost-Efficient Serving of Mixture-of-Experts with
/// Asynchrony", arXiv 2505.08944) profiles per-layer expert counts and describes their sorted
/// popularity by an exponential fit; its fitted constants are not public, so λ is a
/// parameter. Default λ = 2/E (RouterSpec::exp_rate < 0): scale-free in E, the hottest expert
/// gets p_0 = (1 − e^{−λ})/(1 − e^{−λE}) ≈ 2/(1 − e^{−2}) / E ≈ 2.3× the mean and the
/// coldest ≈ 0.31×. That matches the real Switch-8 BookCorpus trace (max/mean per layer
/// 1.4–2.5, computed from ../shared/data/routing) and is mild next to Switch-128's (8.5–52);
/// raise λ for heavier skew (max/mean ≈ c/(1 − e^{−c}) for λ = c/E, large E).
/// Errors: InvalidArgument for λ < 0 or non-finite, or an order that is not a permutation
/// of [0, E).
absl::StatusOr<std::vector<double>> exponential_probabilities(
    double exp_rate, const std::vector<int32_t>& popularity_order);

/// The seeded popularity order of one block for `exponential`: a Fisher–Yates shuffle of
/// [0, E) driven by SplitMix64(seed ^ splitmix(block)), so each block has its own hottest
/// expert and blocks are independent. order[r] = expert of rank r.
std::vector<int32_t> exponential_popularity_order(int64_t num_experts, uint64_t seed,
                                                  int32_t block);

}  // namespace muflow::engine::routing
