#include "engine/trace/trace_intervals.hpp"

#include <algorithm>
#include <cmath>

namespace muflow::engine::trace::trace_intervals {

// Union of sorted intervals, merging overlapping and touching ones.
std::vector<Interval> merge_sorted(const std::vector<Interval>& sorted) {
  std::vector<Interval> out;
  for (const Interval& iv : sorted) {
    if (!out.empty() && iv.begin <= out.back().end) {
      out.back().end = std::max(out.back().end, iv.end);
    } else {
      out.push_back(iv);
    }
  }
  return out;
}

double total_length(const std::vector<Interval>& disjoint) {
  double total = 0.0;
  for (const Interval& iv : disjoint) total += iv.end - iv.begin;
  return total;
}

// a \ b for two sorted disjoint interval lists.
std::vector<Interval> subtract(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  size_t j = 0;
  for (const Interval& w : a) {
    double cur = w.begin;
    while (j < b.size() && b[j].end <= cur) ++j;
    size_t k = j;
    while (k < b.size() && b[k].begin < w.end) {
      if (b[k].begin > cur) out.push_back({cur, b[k].begin});
      cur = std::max(cur, b[k].end);
      if (b[k].end >= w.end) break;
      ++k;
    }
    if (cur < w.end) out.push_back({cur, w.end});
    j = k;
  }
  return out;
}

// Adds the coverage of disjoint `intervals` to per-bucket sums (bucket i = [i*bw, (i+1)*bw)
// relative to t0; the last bucket is open-ended).
void add_coverage(const std::vector<Interval>& intervals, double t0, double bw,
                  std::vector<double>* acc) {
  const int64_t n = static_cast<int64_t>(acc->size());
  if (n == 0 || !(bw > 0)) return;
  for (const Interval& iv : intervals) {
    const double a = iv.begin - t0, b = iv.end - t0;
    int64_t i = std::clamp<int64_t>(static_cast<int64_t>(std::floor(a / bw)), 0, n - 1);
    for (; i < n; ++i) {
      const double lo = static_cast<double>(i) * bw;
      const double hi = i == n - 1 ? std::numeric_limits<double>::infinity() : lo + bw;
      const double overlap = std::min(b, hi) - std::max(a, lo);
      if (overlap > 0) (*acc)[static_cast<size_t>(i)] += overlap;
      if (b <= hi) break;
    }
  }
}

std::vector<double> fractions(std::vector<double> covered, double bw) {
  for (double& c : covered) c = bw > 0 ? std::clamp(c / bw, 0.0, 1.0) : 0.0;
  return covered;
}

// Longest first; ties: earlier first.
std::vector<TimeSpan> longest_gaps(const std::vector<Interval>& busy,
                                   const std::vector<Interval>& wait, double t0, double t_end,
                                   int64_t max_gaps) {
  std::vector<TimeSpan> gaps;
  double prev = t0;
  size_t i = 0, j = 0;
  while (i < busy.size() || j < wait.size()) {
    const bool take_busy = j >= wait.size() || (i < busy.size() && busy[i].begin <= wait[j].begin);
    const Interval& iv = take_busy ? busy[i++] : wait[j++];
    if (iv.begin > prev) gaps.push_back({prev - t0, iv.begin - prev});
    prev = std::max(prev, iv.end);
  }
  if (t_end > prev) gaps.push_back({prev - t0, t_end - prev});
  const auto longer = [](const TimeSpan& x, const TimeSpan& y) {
    return x.dur_us != y.dur_us ? x.dur_us > y.dur_us : x.ts_us < y.ts_us;
  };
  const size_t keep = static_cast<size_t>(std::max<int64_t>(max_gaps, 0));
  if (gaps.size() > keep) {
    std::partial_sort(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(keep), gaps.end(),
                      longer);
    gaps.resize(keep);
  } else {
    std::sort(gaps.begin(), gaps.end(), longer);
  }
  return gaps;
}

// (ts relative to t0, depth) in time order; at most max_points points, each bucket keeping
// its largest sample.
std::vector<std::pair<double, double>> downsample_max(
    std::vector<std::pair<double, double>> samples, double t0, double duration,
    int64_t max_points) {
  std::stable_sort(samples.begin(), samples.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  const size_t n = static_cast<size_t>(std::max<int64_t>(max_points, 1));
  std::vector<std::pair<double, double>> out;
  if (samples.size() <= n || !(duration > 0)) {
    if (samples.size() > n) samples.resize(n);  // zero-length window: all at one instant
    for (auto& [ts, v] : samples) out.emplace_back(ts - t0, v);
    if (!(duration > 0) && !out.empty()) {
      // All samples share one instant: keep the largest.
      const auto best = std::max_element(
          out.begin(), out.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
      return {*best};
    }
    return out;
  }
  const double bw = duration / static_cast<double>(n);
  int64_t current = -1;
  for (const auto& [ts, v] : samples) {
    const int64_t b = std::clamp<int64_t>(static_cast<int64_t>(std::floor((ts - t0) / bw)), 0,
                                          static_cast<int64_t>(n) - 1);
    if (b != current) {
      out.emplace_back(ts - t0, v);
      current = b;
    } else if (v > out.back().second) {
      out.back() = {ts - t0, v};
    }
  }
  return out;
}

}  // namespace muflow::engine::trace::trace_intervals
