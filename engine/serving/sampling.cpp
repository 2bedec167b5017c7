#include "engine/serving/sampling.hpp"

#include "engine/splitmix64.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace muflow::engine::serving {
namespace {


}  // namespace

double counter_uniform(uint64_t seed, uint64_t a, uint64_t b) {
  const uint64_t h = splitmix64_mix(splitmix64_mix(splitmix64_mix(seed) ^ a) ^ b);
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

int32_t sample_token(const float* logits, int64_t vocab, const topology::SamplingSpec& sampling,
                     int64_t request_id, int64_t position) {
  if (sampling.temperature <= 0.0) {
    int64_t best = 0;
    for (int64_t i = 1; i < vocab; ++i) {
      if (logits[i] > logits[best]) best = i;
    }
    return static_cast<int32_t>(best);
  }
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  // NaN logits count as -inf (never drawn) so the comparison stays a strict weak order.
  auto key = [&](int32_t i) {
    return std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i];
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return key(a) > key(b); });
  const double inv_t = 1.0 / sampling.temperature;
  const double max_logit = key(order[0]);
  std::vector<double> p(vocab);
  double total = 0.0;
  for (int64_t i = 0; i < vocab; ++i) {
    p[i] = std::isnan(logits[order[i]]) ? 0.0 : std::exp((key(order[i]) - max_logit) * inv_t);
    total += p[i];
  }
  int64_t keep = vocab;
  if (sampling.top_p < 1.0) {
    double mass = 0.0;
    for (int64_t i = 0; i < vocab; ++i) {
      mass += p[i] / total;
      if (mass >= sampling.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = 0.0;
  for (int64_t i = 0; i < keep; ++i) kept += p[i];
  const double u = counter_uniform(sampling.seed,
                                   static_cast<uint64_t>(sampling.key_by_request ? request_id : 0),
                                   static_cast<uint64_t>(position)) * kept;
  double acc = 0.0;
  for (int64_t i = 0; i < keep; ++i) {
    acc += p[i];
    if (u < acc) return order[i];
  }
  return order[keep - 1];
}

}  // namespace muflow::engine::serving
