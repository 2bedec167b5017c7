#pragma once
/// \file
/// A bounded sample of latencies: every value while there are at most `capacity`, then a
/// uniform random subset of that size (reservoir sampling, Algorithm R: Vitter, "Random
/// Sampling with a Reservoir", ACM TOMS 11(1), 1985), with the exact count and sum kept on
/// the side. What a long-lived engine's percentiles are taken over, so its memory does not
/// grow with the requests it served.

#include <cstdint>
#include <vector>

namespace muflow::engine::serving {

/// Single owner (the coordinator's metrics recorder); not thread-safe. Deterministic: the
/// replaced slot of the n-th value is a hash of n (counter_uniform), so equal inputs give
/// equal samples.
class LatencySamples {
 public:
  /// `capacity` >= 1 values kept at most (8 bytes each).
  explicit LatencySamples(int64_t capacity = int64_t{1} << 20);
  /// Adds one latency (any unit; the recorder uses seconds). Non-finite values are ignored.
  void add(double value);
  /// All values added while count() <= capacity; afterwards a uniform sample of `capacity`.
  const std::vector<double>& samples() const { return samples_; }
  int64_t count() const { return count_; }  ///< values added (exact)
  double sum() const { return sum_; }       ///< of every value added (exact up to rounding)
  int64_t capacity() const { return capacity_; }

 private:
  int64_t capacity_;
  int64_t count_ = 0;
  double sum_ = 0.0;
  std::vector<double> samples_;
};

}  // namespace muflow::engine::serving
