#include "kernels/sim/host_time_table.hpp"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/assert.hpp"

namespace muflow::kernels::sim {

double median(std::vector<double> v) {
  MUFLOW_ASSERT(!v.empty(), "median of no value");
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double trimmed_mean(std::vector<double> v) {
  MUFLOW_ASSERT(!v.empty(), "trimmed mean of no value");
  std::sort(v.begin(), v.end());
  // One in fifty each side, and at least one from ten values up.
  const size_t cut = v.size() >= 10 ? std::max<size_t>(1, v.size() / 50) : 0;
  double sum = 0;
  for (size_t i = cut; i < v.size() - cut; ++i) sum += v[i];
  return sum / static_cast<double>(v.size() - 2 * cut);
}

int host_time_bucket(int64_t n) {
  if (n < 1) return 0;
  if (n <= 8) return static_cast<int>(n);
  int log2 = 3;
  while (log2 < 61 && (int64_t{2} << log2) <= n) ++log2;
  return 6 + log2;  // 9..15 → 9, 16..31 → 10, ...
}

double run_spread_of(const std::map<int, std::vector<double>>& log_ratios) {
  std::vector<double> squares;
  for (const auto& [bucket, all] : log_ratios) {
    std::vector<double> v;
    for (const double x : all) {
      if (std::isfinite(x)) v.push_back(x);
    }
    if (v.size() < HostTimeTable::kMinSamples) continue;
    const double mean = trimmed_mean(v);  // a preemption does not move the centre much
    for (const double x : v) squares.push_back((x - mean) * (x - mean));
  }
  if (squares.empty()) return 0.0;
  std::sort(squares.begin(), squares.end());
  const size_t cut = squares.size() >= 10 ? std::max<size_t>(1, squares.size() / 50) : 0;
  double sum = 0;
  for (size_t i = 0; i < squares.size() - cut; ++i) sum += squares[i];
  const double sigma = std::sqrt(sum / static_cast<double>(squares.size() - cut));
  return std::clamp(sigma, 0.0, MeasuredKernels::kMaxRunSpread);
}

std::string host_time_row(MeasuredKernels::RunKind kind, int64_t n, double seconds) {
  const double s = host_time_signed(kind) ? seconds : std::max(0.0, seconds);
  return absl::StrCat(host_op_name(kind), ",", n, ",0,0,", absl::StrFormat("%.9g", s), "\n");
}

namespace {

std::vector<double> seconds_of(const std::vector<std::pair<int64_t, double>>& samples) {
  std::vector<double> out;
  out.reserve(samples.size());
  for (const auto& [n, s] : samples) out.push_back(s);
  return out;
}

}  // namespace

HostTimeTable::HostTimeTable(const Samples& excess, size_t min_samples)
    : min_samples_(std::max<size_t>(1, min_samples)) {  // trimmed_mean needs a sample
  for (const auto& [key, samples] : excess) {
    if (samples.size() < min_samples_) continue;
    std::vector<double> sizes;
    sizes.reserve(samples.size());
    for (const auto& [n, s] : samples) sizes.push_back(static_cast<double>(n));
    const double s = trimmed_mean(seconds_of(samples));
    rows_[key] = {std::llround(median(std::move(sizes))),
                  host_time_signed(key.first) ? s : std::max(0.0, s)};
  }
}

double HostTimeTable::refine(const Samples& residual) {
  double moved = 0;
  for (auto& [key, row] : rows_) {
    const auto it = residual.find(key);
    if (it == residual.end() || it->second.size() < min_samples_) continue;
    double next = row.second + trimmed_mean(seconds_of(it->second));
    if (!host_time_signed(key.first)) next = std::max(0.0, next);
    moved = std::max(moved, std::abs(next - row.second));
    row.second = next;
  }
  return moved;
}

std::string HostTimeTable::rows() const {
  std::string out;
  for (const auto& [key, row] : rows_)
    absl::StrAppend(&out, host_time_row(key.first, row.first, row.second));
  return out;
}

const std::pair<int64_t, double>* HostTimeTable::row(Kind kind, int bucket) const {
  const auto it = rows_.find({kind, bucket});
  return it == rows_.end() ? nullptr : &it->second;
}

}  // namespace muflow::kernels::sim
