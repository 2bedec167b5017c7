// #15 admission limit: under a load far above capacity, `[scheduler] max_queued_requests`
// bounds the requests waiting to be admitted; the excess is rejected at once (finish reason
// "rejected") instead of queueing, so every request still gets an outcome and TTFT stays
// bounded. Sim backend (virtual time: deterministic and fast).
#include <gtest/gtest.h>

#include <memory>

#include "actors/server.hpp"
#include "small_topology.hpp"

namespace muflow {
namespace {

actors::RunOutcome overload(int64_t max_queued) {
  engine::topology::Topology t = testing_fixtures::small_topology(2);
  t.backend = "sim";
  for (auto& d : t.devices) d.kind = "A100-80GB";
  t.workload.kind = "poisson";
  t.workload.num_requests = 3000;
  t.workload.rate_per_s = 1e5;  // far above what 2 simulated GPUs serve
  t.workload.input_min = t.workload.input_max = 16;
  t.workload.output_min = t.workload.output_max = 8;
  t.scheduler.max_batch_requests = 16;
  t.scheduler.max_queued_requests = max_queued;
  auto server = actors::Server::create(t);
  EXPECT_TRUE(server.ok()) << server.status();
  auto requests = (*server)->make_workload();
  EXPECT_TRUE(requests.ok()) << requests.status();
  auto outcome = (*server)->run(*requests);
  EXPECT_TRUE(outcome.ok()) << outcome.status();
  return *outcome;
}

TEST(Admission, QueueLimitRejectsTheExcessAndBoundsTtft) {
  const actors::RunOutcome limited = overload(32);
  const actors::RunOutcome unlimited = overload(0);
  int64_t rejected = 0, completed = 0;
  for (const actors::RequestOutput& o : limited.outputs) {
    if (o.finish_reason == actors::FinishReason::kRejected) {
      ++rejected;
      EXPECT_TRUE(o.output.empty());
    } else {
      EXPECT_EQ(o.finish_reason, actors::FinishReason::kLength) << o.request_id;
      EXPECT_EQ(o.output.size(), 8u);
      ++completed;
    }
  }
  EXPECT_EQ(rejected + completed, 3000);  // every request has an outcome
  EXPECT_GT(rejected, 0);
  EXPECT_EQ(limited.metrics.num_rejected_requests, rejected);
  EXPECT_EQ(limited.metrics.num_completed_requests, completed);
  EXPECT_EQ(unlimited.metrics.num_rejected_requests, 0);
  EXPECT_EQ(unlimited.metrics.num_completed_requests, 3000);
  // The queue a request can wait in is bounded: its TTFT too (the unlimited run's tail waits
  // behind thousands).
  EXPECT_LT(limited.metrics.ttft.p99_ms, 0.5 * unlimited.metrics.ttft.p99_ms);
}

TEST(Admission, UnlimitedByDefault) {
  EXPECT_EQ(engine::topology::synthetic_demo_topology().scheduler.max_queued_requests, 0);
  auto bad = engine::topology::parse_topology_string("[scheduler]\nmax_queued_requests = -1\n",
                                                     "bad.toml", "/tmp");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("max_queued_requests"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace muflow
