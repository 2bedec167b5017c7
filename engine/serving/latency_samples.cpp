#include "engine/serving/latency_samples.hpp"

#include <algorithm>
#include <cmath>

#include "engine/serving/sampling.hpp"

namespace muflow::engine::serving {

LatencySamples::LatencySamples(int64_t capacity) : capacity_(std::max<int64_t>(capacity, 1)) {}

void LatencySamples::add(double value) {
  if (!std::isfinite(value)) return;  // a broken clock reading must not poison sum()
  ++count_;
  sum_ += value;
  if (count_ <= capacity_) {
    samples_.push_back(value);
    return;
  }
  // Algorithm R: the n-th value replaces a uniform slot of [0, n) when that slot is kept.
  const auto slot =
      static_cast<int64_t>(counter_uniform(0x6c6174656e6379, static_cast<uint64_t>(count_), 0) *
                           static_cast<double>(count_));
  if (slot < capacity_) samples_[static_cast<size_t>(slot)] = value;
}

}  // namespace muflow::engine::serving
