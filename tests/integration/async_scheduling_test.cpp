// AsyncMoE §5.3 in the sim, scaled down so it runs in seconds: the §5.1 topology
// (Mixtral-8x7B dims with MQA, 8 × A100-80GB, 4 attention + 4 expert GPUs, exponential
// router, merge = "wave") with 8 blocks instead of 32 and short requests, at a Poisson rate
// near the scheduler's capacity. Under continuous arrivals FLFS keeps serving the new
// requests' early blocks and the later blocks wait, so requests finish more slowly than they
// arrive (the paper's Figure 12); the defragging scheduler keeps up and has the lower ITL.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "actors/server.hpp"
#include "engine/topology/topology.hpp"

namespace muflow {
namespace {

engine::serving::RunMetrics run_policy(const std::string& policy) {
  absl::StatusOr<engine::topology::Topology> t = engine::topology::parse_topology_file(
      std::string(MUFLOW_SOURCE_DIR) + "/topologies/sim-asyncmoe-mixtral-mqa-8xa100-80gb.toml");
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return {};
  EXPECT_EQ(t->wiring, "async");
  EXPECT_EQ(t->scheduler.merge, "wave");
  EXPECT_TRUE(t->model.synthetic.has_value());
  if (!t->model.synthetic) return {};
  t->model.synthetic->num_layers = 8;
  t->scheduler.policy = policy;
  t->workload.num_requests = 3000;
  t->workload.rate_per_s = 700;  // ~20 % below the sustained rate of defrag and MTFS here
  t->workload.input_min = 20;
  t->workload.input_max = 60;
  t->workload.output_min = 40;
  t->workload.output_max = 80;
  t->trace_file.clear();
  absl::StatusOr<std::unique_ptr<actors::Server>> server = actors::Server::create(*t);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return {};
  absl::StatusOr<std::vector<engine::serving::Request>> requests = (*server)->make_workload();
  EXPECT_TRUE(requests.ok()) << requests.status();
  if (!requests.ok()) return {};
  absl::StatusOr<actors::RunOutcome> out = (*server)->run(*requests);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  EXPECT_EQ(out->metrics.num_completed_requests, 3000) << policy;
  return out->metrics;
}

TEST(AsyncScheduling, FlfsFallsBehindContinuousArrivalsWhileDefragKeepsUp) {
  const engine::serving::RunMetrics flfs = run_policy("flfs");
  const engine::serving::RunMetrics defrag = run_policy("defrag");
  const engine::serving::RunMetrics mtfs = run_policy("most-tokens");
  ASSERT_GT(defrag.load_window_s, 1.0);
  // Figure 12: FLFS's completions fall behind the input; defrag's keep up with it.
  EXPECT_LT(flfs.load_completions_per_s, 0.9 * flfs.load_arrivals_per_s);
  EXPECT_GT(defrag.load_completions_per_s, 0.97 * defrag.load_arrivals_per_s);
  // Figure 11: defrag has the lowest mean ITL, and a lower TTFT tail than FLFS.
  EXPECT_LT(defrag.itl.mean_ms, flfs.itl.mean_ms);
  EXPECT_LT(defrag.itl.mean_ms, mtfs.itl.mean_ms);
  EXPECT_LT(defrag.ttft.p99_ms, flfs.ttft.p99_ms);
}

}  // namespace
}  // namespace muflow
