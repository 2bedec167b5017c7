// The HTTP server's own metrics (http/server/serve_metrics.hpp): how each way a request can end
// is counted in the /metrics exposition. A request the engine failed is an error, not one of
// request_success_total's reasons (it used to be counted there as "abort", the reason of a
// client that went away), and it stays out of the end-to-end latency.

#include "http/server/serve_metrics.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "actors/coordinator.hpp"

namespace muflow::http {
namespace {

using ::testing::HasSubstr;

std::string render(const ServeMetrics& m) { return m.render(actors::EngineStats{}, -1, "m"); }

TEST(ServeMetrics, AnEngineErrorIsCountedApartFromTheFinishedReasons) {
  ServeMetrics m;
  m.on_finished("stop", 0.5);
  m.on_finished("abort", 0.25);
  m.on_error();
  m.on_error();
  const std::string text = render(m);
  EXPECT_THAT(text, HasSubstr("muflow:request_errors_total{model_name=\"m\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("muflow:request_success_total{model_name=\"m\","
                              "finished_reason=\"stop\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("muflow:request_success_total{model_name=\"m\","
                              "finished_reason=\"abort\"} 1\n"));
  // Only the two finished requests have an end-to-end latency.
  EXPECT_THAT(text, HasSubstr("muflow:e2e_request_latency_seconds_count{model_name=\"m\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE muflow:request_errors_total counter\n"));
}

}  // namespace
}  // namespace muflow::http
