#include "engine/routing/router_sampling.hpp"

#include <algorithm>
#include <cmath>

#include "engine/serving/sampling.hpp"
#include "kernels/assert.hpp"

namespace muflow::engine::routing {
namespace {

uint64_t mix64(uint64_t z) {  // splitmix64 finaliser (Steele, Lea & Flood 2014)
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

constexpr int kMaxRejections = 64;

}  // namespace

uint64_t router_token_key(int32_t block, int64_t request_id, int64_t position) {
  return mix64(mix64(mix64(static_cast<uint64_t>(static_cast<int64_t>(block))) ^
                     static_cast<uint64_t>(request_id)) ^
               static_cast<uint64_t>(position));
}

TopkSampler::TopkSampler(std::vector<double> weights) : p_(std::move(weights)) {
  MUFLOW_ASSERT(!p_.empty(), "empty distribution");
  const size_t n = p_.size();
  double total = 0.0;
  for (double w : p_) {
    MUFLOW_ASSERT(w >= 0.0 && std::isfinite(w), "weight must be finite and >= 0");
    total += w;
  }
  MUFLOW_ASSERT(total > 0.0, "all weights zero");
  for (double& w : p_) w /= total;
  // Vose's construction: scaled q_i = n·p_i; pair each q < 1 with a q ≥ 1 that donates the
  // rest of the column.
  keep_.assign(n, 1.0);
  alias_.resize(n);
  std::vector<double> q(n);
  std::vector<int32_t> small, large;
  for (size_t i = 0; i < n; ++i) {
    q[i] = p_[i] * static_cast<double>(n);
    alias_[i] = static_cast<int32_t>(i);
    (q[i] < 1.0 ? small : large).push_back(static_cast<int32_t>(i));
  }
  while (!small.empty() && !large.empty()) {
    const int32_t s = small.back();
    small.pop_back();
    const int32_t l = large.back();
    keep_[s] = q[s];
    alias_[s] = l;
    q[l] -= 1.0 - q[s];
    if (q[l] < 1.0) {
      large.pop_back();
      small.push_back(l);
    }
  }
  // Leftovers (rounding) keep their own column. A zero-probability entry must never be
  // drawn: send its whole column to the most probable entry.
  const int32_t top = static_cast<int32_t>(std::max_element(p_.begin(), p_.end()) - p_.begin());
  for (size_t i = 0; i < n; ++i) {
    if (p_[i] == 0.0) {
      keep_[i] = 0.0;
      if (p_[alias_[i]] == 0.0) alias_[i] = top;
    }
  }
}

int32_t TopkSampler::sample(double u) const {
  const double x = u * static_cast<double>(p_.size());
  const size_t i = std::min(static_cast<size_t>(x), p_.size() - 1);
  return x - static_cast<double>(i) < keep_[i] ? static_cast<int32_t>(i) : alias_[i];
}

void TopkSampler::draw(uint64_t seed, uint64_t key, int64_t k, int32_t* ids,
                       float* out_weights) const {
  const int64_t n = size();
  MUFLOW_ASSERT(k >= 1 && k <= n, "top-k out of range");
  auto chosen = [&](int64_t count, int32_t e) {
    return std::find(ids, ids + count, e) != ids + count;
  };
  uint64_t counter = 0;
  for (int64_t j = 0; j < k; ++j) {
    int32_t pick = -1;
    for (int attempt = 0; attempt < kMaxRejections; ++attempt) {
      const int32_t e = sample(serving::counter_uniform(seed, key, counter++));
      if (!chosen(j, e)) {
        pick = e;
        break;
      }
    }
    if (pick < 0) {  // walk the unchosen mass directly (rare: the chosen hold most of it)
      double rest = 0.0;
      for (int32_t e = 0; e < n; ++e) {
        if (!chosen(j, e)) rest += p_[e];
      }
      const double u = serving::counter_uniform(seed, key, counter++);
      if (rest > 0.0) {
        const double x = u * rest;
        double acc = 0.0;
        int32_t last = -1;
        for (int32_t e = 0; e < n && pick < 0; ++e) {
          if (chosen(j, e) || p_[e] == 0.0) continue;
          last = e;
          acc += p_[e];
          if (acc > x) pick = e;
        }
        if (pick < 0) pick = last;
      } else {  // the unchosen experts have no mass: uniform among them
        int64_t skip = std::min<int64_t>(static_cast<int64_t>(u * (n - j)), n - j - 1);
        for (int32_t e = 0; e < n; ++e) {
          if (chosen(j, e)) continue;
          if (skip-- == 0) {
            pick = e;
            break;
          }
        }
      }
    }
    ids[j] = pick;
  }
  double sum = 0.0;
  for (int64_t j = 0; j < k; ++j) sum += p_[ids[j]];
  for (int64_t j = 0; j < k; ++j) {
    out_weights[j] =
        sum > 0.0 ? static_cast<float>(p_[ids[j]] / sum) : 1.0f / static_cast<float>(k);
  }
}

}  // namespace muflow::engine::routing
