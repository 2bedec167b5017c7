#pragma once
/// \file
/// The draw every synthetic router shares: k distinct experts from a categorical
/// distribution, without replacement, from counter-based uniforms keyed by the token.

#include <cstdint>
#include <vector>

namespace muflow::engine::routing {

/// The 64-bit key of one token's draws: splitmix64 finaliser chained over (block,
/// request_id, position). Pure; two distinct tokens collide with probability ~2^-64.
uint64_t router_token_key(int32_t block, int64_t request_id, int64_t position);

/// Draws k distinct indices from a fixed categorical distribution p[0..n) (weights ≥ 0, not
/// all zero; normalised on construction). Immutable after construction; thread-safe.
///
/// Draw j of a token uses u_j = counter_uniform(seed, key, j) and Walker's alias method
/// (Walker, "An efficient method for generating discrete random variables with general
/// distributions", ACM TOMS 1977; table built with Vose's O(n) construction, IEEE TSE 1991):
/// column i = ⌊u·n⌋, keep i when the fraction u·n − i < prob[i], else take alias[i] — O(1)
/// per draw and nearly branch-free. Sampling without replacement is sequential: each further
/// expert is drawn from p restricted to the experts not yet chosen and renormalised (the
/// "successive sampling" of AsyncMoE's router and of torch.multinomial(replacement=False)).
/// It is done by rejection — draw from p, redraw an already chosen index — which has exactly
/// that distribution; after 64 rejections in a row the remaining mass is walked directly with
/// one more uniform, so the result is still exact and the cost bounded. When the unchosen
/// experts have zero mass, the rest are drawn uniformly among the unchosen experts.
class TopkSampler {
 public:
  explicit TopkSampler(std::vector<double> weights);

  /// Writes k distinct indices to `ids` (draw order) and their probabilities renormalised
  /// over the k to `out_weights` (1/k each when those probabilities are all zero).
  /// Requires 1 ≤ k ≤ size().
  void draw(uint64_t seed, uint64_t key, int64_t k, int32_t* ids, float* out_weights) const;

  int64_t size() const { return static_cast<int64_t>(p_.size()); }
  /// The normalised probabilities.
  const std::vector<double>& probabilities() const { return p_; }

 private:
  int32_t sample(double u) const;

  std::vector<double> p_;       ///< normalised
  std::vector<double> keep_;    ///< alias table: probability of keeping column i
  std::vector<int32_t> alias_;  ///< alias table: the index column i otherwise yields
};

}  // namespace muflow::engine::routing
