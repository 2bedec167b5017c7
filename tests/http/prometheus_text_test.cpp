// The Prometheus text exposition: families, label escaping, cumulative histogram buckets.
#include "http/server/prometheus_text.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace muflow::http {
namespace {

TEST(PrometheusText, CounterWithEscapedLabels) {
  PrometheusText p;
  p.family("muflow:x_total", "counter", "A help\nline with \\.");
  p.sample("muflow:x_total", {{"a", "q\"uo\\te\n"}}, 3);
  EXPECT_EQ(p.str(),
            "# HELP muflow:x_total A help\\nline with \\\\.\n"
            "# TYPE muflow:x_total counter\n"
            "muflow:x_total{a=\"q\\\"uo\\\\te\\n\"} 3\n");
}

TEST(PrometheusText, HistogramBucketsAreCumulative) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.1);  // le is inclusive
  h.observe(0.5);
  h.observe(7.0);
  h.observe(std::nan(""));  // ignored
  PrometheusText p;
  p.histogram("h", {{"m", "k"}}, h.snapshot());
  EXPECT_EQ(p.str(),
            "h_bucket{m=\"k\",le=\"0.1\"} 2\n"
            "h_bucket{m=\"k\",le=\"1\"} 3\n"
            "h_bucket{m=\"k\",le=\"+Inf\"} 4\n"
            "h_sum{m=\"k\"} 7.65\n"
            "h_count{m=\"k\"} 4\n");
}

TEST(PrometheusText, ValuesReadBackExactly) {
  EXPECT_EQ(format_value(0.001), "0.001");
  EXPECT_EQ(format_value(42), "42");
  EXPECT_EQ(format_value(-INFINITY), "-Inf");
  EXPECT_EQ(format_value(std::nan("")), "NaN");
  for (double v : {0.1 + 0.2, 1e-9, 123456.789, 2.5e20}) {
    EXPECT_EQ(std::strtod(format_value(v).c_str(), nullptr), v);
  }
}

}  // namespace
}  // namespace muflow::http
