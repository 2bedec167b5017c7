// The `async-replicated` wiring (actors/wirings/async_replicated.hpp): AsyncMoE's barrier-free
// pipeline with replicas of hot experts. Invariant 1: the tokens and prompt logits equal the
// single-device reference and sync bitwise, whichever stage computed a row; the replica stages
// really run; the replica planner picks the hottest experts and the least loaded devices; bad
// keys get clear errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "actors/wirings/async_replicated.hpp"
#include "invariance_fixtures.hpp"
#include "nlohmann/json.hpp"
#include "scratch_path.hpp"

namespace muflow {
namespace {

using engine::serving::Request;
using engine::topology::Topology;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using testing_fixtures::small_mixtral;
using testing_fixtures::topology_for;

// Tokens each replica stage ran, from the run's Chrome trace.
int64_t replica_tokens(const std::string& trace_file) {
  std::ifstream in(trace_file);
  nlohmann::json trace = nlohmann::json::parse(in);
  int64_t tokens = 0;
  for (const auto& ev : trace["traceEvents"]) {
    if (ev.value("ph", "") != "X") continue;
    if (ev.value("name", "").find("replica") == std::string::npos) continue;
    tokens += ev["args"].value("tokens", int64_t{0});
  }
  return tokens;
}

void expect_replicated_equals_reference_and_sync(Topology base, int num_requests) {
  const testing_fixtures::Reference ref = testing_fixtures::reference_for(base, num_requests, 13);
  ASSERT_EQ(ref.tokens.size(), static_cast<size_t>(num_requests));
  Topology sync = base;
  const Topology four = topology_for(4);
  sync.devices = four.devices;
  sync.scheduler = four.scheduler;
  const actors::RunOutcome sync_out = testing_fixtures::run_topology(sync, ref.requests);
  ASSERT_EQ(sync_out.outputs.size(), ref.requests.size());
  struct Shape {
    int devices, attention_devices;
    std::vector<int64_t> replicated;
  };
  const std::vector<Shape> shapes = {
      {3, 1, {0}}, {5, 2, {0, 3, 5}}, {8, 4, {0, 1, 2, 3, 4, 5, 6, 7}}};
  const std::string trace =
      muflow::testing::scratch_path("replicated-async-test.json").string();
  for (const Shape& shape : shapes) {
    Topology t = base;
    const Topology cluster = topology_for(shape.devices);
    t.devices = cluster.devices;
    t.scheduler = cluster.scheduler;
    t.scheduler.max_batch_tokens = 16;
    t.wiring = "async-replicated";
    t.attention_devices = shape.attention_devices;
    t.replica_experts = shape.replicated;
    t.trace_file = trace;
    const std::string what = std::to_string(shape.devices) + " devices, " +
                             std::to_string(shape.replicated.size()) + " replicated experts";
    const actors::RunOutcome out = testing_fixtures::run_topology(t, ref.requests);
    ASSERT_EQ(out.outputs.size(), ref.requests.size()) << what;
    testing_fixtures::expect_outputs_match(out.outputs, ref.tokens, ref.logits, what);
    for (size_t i = 0; i < ref.requests.size(); ++i) {
      EXPECT_EQ(out.outputs[i].output, sync_out.outputs[i].output) << what << ", request " << i;
    }
    EXPECT_GT(replica_tokens(trace), 0) << what << ": no replica stage ran a token";
  }
  std::filesystem::remove(trace);
}

TEST(ReplicatedAsync, SyntheticMixtralTop2EqualsReferenceAndSync) {
  Topology t;
  t.model.synthetic = small_mixtral(2);
  t.model.seed = 41;
  expect_replicated_equals_reference_and_sync(t, 8);
}

TEST(ReplicatedAsync, SyntheticMixtralTop3EqualsReferenceAndSync) {
  Topology t;
  t.model.synthetic = small_mixtral(3);
  t.model.seed = 42;
  expect_replicated_equals_reference_and_sync(t, 6);
}

// 2 attention + 3 expert devices, 6 experts round-robin over devices 2, 3, 4.
engine::planning::Placement five_device_placement() {
  Topology t = topology_for(5);
  t.attention_devices = 2;
  absl::StatusOr<engine::planning::Placement> p = engine::planning::make_placement(t, 6, true);
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

TEST(ReplicatedAsync, PlannerPicksHottestExpertsAndLeastLoadedDevices) {
  const engine::planning::Placement p = five_device_placement();  // experts 0..5 on 2,3,4,2,3,4
  Topology t = topology_for(5);
  // Block 0: expert 0 (device 2) is hottest, then 4 (device 3); block 1: expert 5 (device 4).
  const std::vector<std::vector<double>> loads = {{100, 1, 1, 1, 40, 1}, {1, 1, 1, 1, 1, 90}};
  absl::StatusOr<std::vector<actors::BlockReplicas>> plan =
      actors::plan_expert_replicas(t, p, loads, 2, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Block 0 device loads: d2 = 101, d3 = 41, d4 = 2. Expert 0 → d4 (least), which then holds
  // 52; expert 4 (home d3) → d2 (51) vs d4 (52): d2.
  EXPECT_THAT((*plan)[0], ElementsAre(Pair(0, 4), Pair(4, 2)));
  // Block 1: d2 = 2, d3 = 2, d4 = 91. Expert 5 → d2 (tie with d3: lowest index); then expert
  // 0 (all others tie at 1, lowest id) home d2 (now 47) → d3 (2).
  EXPECT_THAT((*plan)[1], ElementsAre(Pair(5, 2), Pair(0, 3)));
  // An explicit list replicates exactly those experts in every block.
  plan = actors::plan_expert_replicas(t, p, loads, 0, {3});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT((*plan)[0], ElementsAre(Pair(3, 4)));
  EXPECT_THAT((*plan)[1], ElementsAre(Pair(3, 3)));
}

TEST(ReplicatedAsync, PlannerErrorsNameTheKey) {
  const engine::planning::Placement p = five_device_placement();
  Topology t = topology_for(5);
  const std::vector<std::vector<double>> loads(2, std::vector<double>(6, 1.0));
  auto msg = [&](int64_t count, std::vector<int64_t> experts) {
    return std::string(
        actors::plan_expert_replicas(t, p, loads, count, experts).status().message());
  };
  EXPECT_THAT(msg(7, {}), HasSubstr("key 'placement.replicas': expected at most 6"));
  EXPECT_THAT(msg(0, {6}), HasSubstr("key 'placement.replica_experts': expert 6 is outside"));
  EXPECT_THAT(msg(0, {1, 1}), HasSubstr("expert 1 is listed twice"));
  Topology t3 = topology_for(3);
  t3.attention_devices = 2;
  absl::StatusOr<engine::planning::Placement> one = engine::planning::make_placement(t3, 6, true);
  ASSERT_TRUE(one.ok());
  EXPECT_THAT(std::string(actors::plan_expert_replicas(t3, *one, loads, 1, {}).status().message()),
              HasSubstr("a replica needs a second expert device"));
}

TEST(ReplicatedAsync, ServerRefusesReplicasWhereTheyCannotRun) {
  Topology t = topology_for(4);
  t.model.synthetic = small_mixtral(2);
  t.expert_replicas = 2;
  absl::StatusOr<std::unique_ptr<actors::Server>> s = actors::Server::create(t);  // sync
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(),
              HasSubstr("key 'placement.replicas' applies to wiring \"async-replicated\", got "
                        "\"sync\""));
  t.wiring = "async-replicated";
  s = actors::Server::create(t);  // cpu: no router sample to rank experts by
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("list them with replica_experts"));
}

TEST(ReplicatedAsync, SimRunsReplicasOfTheSampledHotExpertsDeterministically) {
  Topology t = topology_for(6);
  for (auto& d : t.devices) d.kind = "A100-80GB";
  t.backend = "sim";
  t.wiring = "async-replicated";
  t.attention_devices = 2;
  t.model.synthetic = small_mixtral(1);
  t.router.kind = "harmoeny-skew";
  t.router.skew = 0.9;
  t.expert_replicas = 2;
  t.workload.kind = "poisson";
  t.workload.num_requests = 24;
  t.workload.rate_per_s = 2000;
  t.workload.input_min = 8;
  t.workload.max_new_tokens = 0;
  t.workload.input_max = 32;
  t.workload.output_min = 4;
  t.workload.output_max = 12;
  t.workload.seed = 3;
  t.sampling.stop_at_eos = false;
  const std::string trace =
      muflow::testing::scratch_path("replicated-async-sim.json").string();
  t.trace_file = trace;
  std::vector<double> tok_s;
  for (int run = 0; run < 2; ++run) {
    absl::StatusOr<std::unique_ptr<actors::Server>> s = actors::Server::create(t);
    ASSERT_TRUE(s.ok()) << s.status();
    absl::StatusOr<std::vector<Request>> requests = (*s)->make_workload();
    ASSERT_TRUE(requests.ok()) << requests.status();
    absl::StatusOr<actors::RunOutcome> out = (*s)->run(*requests);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->metrics.num_completed_requests, 24);
    tok_s.push_back(out->metrics.output_tokens_per_s);
    EXPECT_GT(replica_tokens(trace), 0);
  }
  EXPECT_EQ(tok_s[0], tok_s[1]);  // virtual time: the same run twice
  std::filesystem::remove(trace);
}

}  // namespace
}  // namespace muflow
