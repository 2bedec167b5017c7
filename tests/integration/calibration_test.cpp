// #19 item 3: what `muflow calibrate` (actors::calibrate) measures and writes, without timing
// assertions beyond loose sanity bounds, so these tests may run beside others (the prediction
// check, which compares timed runs, is sim_prediction_test.cpp and runs alone).
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "actors/calibration.hpp"
#include "calibration_topology.hpp"

namespace muflow::testing_fixtures {
namespace {

// A barrier-free wiring has no barrier whose hand-offs calibration could time, but its devices
// still hand over from one queued stage to the next through their device actors (done → grant):
// calibration times those hand-offs where the next stage had tokens queued (its μ-queue depth in
// the trace) and writes them as host_grant, which the sim charges per grant.
TEST(Calibration, TimesTheHandOffsOfABarrierFreeWiring) {
  const Topology cpu = calibration_topology("async");
  actors::CalibrationOptions options;
  options.max_tokens = 32;
  options.max_context = 64;
  options.repeats = 3;
  std::vector<std::string> progress;
  options.progress = [&](const std::string& line) { progress.push_back(line); };
  std::ostringstream out;
  ASSERT_TRUE(actors::calibrate(cpu, options, out).ok());
  const std::string text = out.str();
  const size_t at = text.find("\nhost_grant,1,0,0,");
  ASSERT_NE(at, std::string::npos) << text;
  const double grant_s = std::stod(text.substr(at + std::string("\nhost_grant,1,0,0,").size()));
  // A message round trip through an actor on a worker thread: more than nothing, far less
  // than a stage run.
  EXPECT_GT(grant_s, 0.0);
  EXPECT_LT(grant_s, 0.05);
  // Progress tells how close the replay of calibration's own runs came.
  EXPECT_TRUE(std::any_of(progress.begin(), progress.end(), [](const std::string& line) {
    return line.find("refinement 2/2: replayed with the rows so far") != std::string::npos;
  }));
}

}  // namespace
}  // namespace muflow::testing_fixtures
