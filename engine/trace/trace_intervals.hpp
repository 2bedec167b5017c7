#pragma once
/// \file
/// The interval pass of the trace analysis (trace_analysis.hpp): unions, differences and
/// coverage of busy / wait slices, idle gaps and counter downsampling. Pure functions on
/// microsecond intervals; any thread.

#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/trace/trace_analysis.hpp"

namespace muflow::engine::trace::trace_intervals {

/// A half-open time interval [begin, end), microseconds.
struct Interval {
  double begin = 0.0, end = 0.0;
  bool operator<(const Interval& o) const {
    return std::tie(begin, end) < std::tie(o.begin, o.end);
  }
};

/// Union of sorted intervals, merging overlapping and touching ones.
std::vector<Interval> merge_sorted(const std::vector<Interval>& sorted);

/// Sum of the lengths of disjoint intervals, microseconds.
double total_length(const std::vector<Interval>& disjoint);

/// a \ b for two sorted disjoint interval lists.
std::vector<Interval> subtract(const std::vector<Interval>& a, const std::vector<Interval>& b);

/// Adds the coverage of disjoint `intervals` to per-bucket sums (bucket i = [i*bw, (i+1)*bw)
/// relative to t0; the last bucket is open-ended).
void add_coverage(const std::vector<Interval>& intervals, double t0, double bw,
                  std::vector<double>* acc);

/// Per-bucket coverage divided by the bucket width `bw`, clamped to [0, 1].
std::vector<double> fractions(std::vector<double> covered, double bw);

/// The `max_gaps` longest idle gaps (neither busy nor waiting) in [t0, t_end), relative to
/// t0; longest first; ties: earlier first.
std::vector<TimeSpan> longest_gaps(const std::vector<Interval>& busy,
                                   const std::vector<Interval>& wait, double t0, double t_end,
                                   int64_t max_gaps);

/// (ts relative to t0, depth) in time order; at most max_points points, each bucket keeping
/// its largest sample.
std::vector<std::pair<double, double>> downsample_max(
    std::vector<std::pair<double, double>> samples, double t0, double duration, int64_t max_points);

}  // namespace muflow::engine::trace::trace_intervals
