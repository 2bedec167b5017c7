#pragma once
/// \file
/// The Prometheus text exposition format (version 0.0.4) by hand: no C++ Prometheus client is
/// packaged in Debian 12 (prometheus-cpp is not), and /metrics needs only counters, gauges
/// and histograms. Source: https://prometheus.io/docs/instrumenting/exposition_formats/
/// (metric and label names, escaping of label values and HELP text, `le` buckets).

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace muflow::http {

/// Label name → value pairs of one sample (names must match [a-zA-Z_][a-zA-Z0-9_]*).
using Labels = std::vector<std::pair<std::string, std::string>>;

/// A cumulative histogram with fixed upper bounds (seconds, or any unit). Thread-safe:
/// observe and snapshot take a mutex.
class Histogram {
 public:
  /// `bounds`: strictly increasing finite upper bounds; +Inf is implicit.
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  ///< [bounds.size() + 1], last = count (+Inf)
    double sum = 0.0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mutex_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  ///< per bucket, not cumulative; last = above every bound
  double sum_ = 0.0;
};

/// Builds one exposition: families (HELP + TYPE once) and their samples. Single owner.
class PrometheusText {
 public:
  /// Starts a family. `type`: "counter", "gauge" or "histogram".
  void family(const std::string& name, const char* type, const std::string& help);
  /// One sample of the current family (a counter's name ends in "_total" by convention).
  void sample(const std::string& name, const Labels& labels, double value);
  /// A histogram's _bucket / _sum / _count samples.
  void histogram(const std::string& name, const Labels& labels, const Histogram::Snapshot& h);
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

/// Escapes a label value: backslash, double quote and newline (the format's three escapes).
std::string escape_label_value(const std::string& value);
/// Formats a sample value: integers without exponent, NaN / +Inf / -Inf as the format spells
/// them, others with the fewest of 15 or 17 significant digits that read back
/// the same value.
std::string format_value(double value);

}  // namespace muflow::http
