// Server::run's host hooks (issue #15): RunCallbacks::on_finish sees each request as it
// finishes while the outcome keeps every output; stop_requested cancels what is left and the
// run ends normally (stopped); the trace's dropped-event count and warning reach the outcome.
#include <atomic>
#include <filesystem>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

#include "actors/server.hpp"
#include "scratch_path.hpp"
#include "small_topology.hpp"

namespace muflow {
namespace {

using engine::serving::Request;
using testing_fixtures::small_topology;

// `num` requests of 4-token prompts, `max_new` tokens each, arriving `gap_s` apart.
std::vector<Request> requests_of(int64_t num, int64_t max_new, double gap_s) {
  std::vector<Request> out;
  for (int64_t i = 0; i < num; ++i) {
    Request r;
    r.id = i;
    r.prompt = {1, static_cast<int32_t>(2 + i % 50), 3, 4};
    r.max_new_tokens = max_new;
    r.arrival_s = gap_s * static_cast<double>(i);
    out.push_back(r);
  }
  return out;
}

TEST(RunCallbacks, OnFinishSeesEveryRequestAndTheOutcomeKeepsThem) {
  auto server = actors::Server::create(small_topology(2));
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<actors::RequestOutput> seen;  // the coordinator calls one at a time
  actors::RunCallbacks cb;
  cb.on_finish = [&](const actors::RequestOutput& r) { seen.push_back(r); };
  absl::StatusOr<actors::RunOutcome> out = (*server)->run(requests_of(6, 5, 0.0), cb);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE(out->stopped);
  ASSERT_EQ(seen.size(), 6u);
  std::set<int64_t> ids;
  for (const actors::RequestOutput& r : seen) {
    ids.insert(r.request_id);
    EXPECT_EQ(r.finish_reason, actors::FinishReason::kLength);
    EXPECT_EQ(r.output, out->outputs[r.request_id].output);  // the outcome still has it
    EXPECT_EQ(r.output.size(), 5u);
  }
  EXPECT_EQ(ids.size(), 6u);
}

TEST(RunCallbacks, StopRequestedCancelsWhatIsLeft) {
  auto server = actors::Server::create(small_topology(2));
  ASSERT_TRUE(server.ok()) << server.status();
  std::atomic<int64_t> num_finished{0};
  actors::RunCallbacks cb;
  cb.on_finish = [&](const actors::RequestOutput& r) {
    if (r.finish_reason != actors::FinishReason::kCancelled) ++num_finished;
  };
  // Stop once two requests finished; three arrive at once, the rest over 1000 s (never run).
  cb.stop_requested = [&] { return num_finished.load() >= 2; };
  std::vector<Request> requests = requests_of(40, 3, 25.0);
  for (int i = 0; i < 3; ++i) requests[i].arrival_s = 0.0;
  absl::StatusOr<actors::RunOutcome> out = (*server)->run(requests, cb);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->stopped);
  int64_t done = 0, cancelled = 0;
  for (const actors::RequestOutput& r : out->outputs) {
    if (r.finish_reason == actors::FinishReason::kCancelled) {
      ++cancelled;
      EXPECT_TRUE(r.cancelled);
    } else {
      EXPECT_EQ(r.finish_reason, actors::FinishReason::kLength);
      ++done;
    }
  }
  EXPECT_GE(done, 2);
  EXPECT_GT(cancelled, 30);
  EXPECT_EQ(done + cancelled, 40);
}

TEST(RunCallbacks, TraceDropsReachTheOutcome) {
  engine::topology::Topology t = small_topology(2);
  const std::filesystem::path dir = muflow::testing::scratch_path("run_callbacks");
  t.trace_file = (dir / "trace.json").string();
  auto server = actors::Server::create(t);
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->set_trace_max_events(10);
  absl::StatusOr<actors::RunOutcome> out = (*server)->run(requests_of(3, 4, 0.0));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_GT(out->num_trace_dropped_events, 0);
  EXPECT_NE(out->trace_warning.find(std::to_string(out->num_trace_dropped_events) + " of"),
            std::string::npos)
      << out->trace_warning;
  EXPECT_NE(out->trace_warning.find("max_events = 10"), std::string::npos) << out->trace_warning;

  (*server)->set_trace_max_events(1'000'000);
  out = (*server)->run(requests_of(3, 4, 0.0));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->num_trace_dropped_events, 0);
  EXPECT_TRUE(out->trace_warning.empty());
}

}  // namespace
}  // namespace muflow
