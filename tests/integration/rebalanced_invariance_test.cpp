// Invariant 1 for the rebalanced wirings of issue 5:
//  - `harmoeny` (HarMoEny §4): tokens rebalanced to devices that fetch the expert must give
//    the single-device reference's tokens and prompt logits bitwise (every (token, expert)
//    row is computed by the same batch-invariant kernel wherever it runs, and merged in
//    top-k order);
//  - `moeshard` (MoEShard §3): every expert split over all devices and the partial outputs
//    summed in shard order. The sum reorders the down projection's float additions, so prompt
//    logits agree to a tolerance (stated below), and the generated tokens must be equal.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "actors/server.hpp"
#include "engine/exec/reference_decoder.hpp"
#include "invariance_fixtures.hpp"

namespace muflow {
namespace {

using engine::model::ModelConfig;
using engine::serving::Request;
using engine::topology::Topology;
using testing_fixtures::make_requests;
using testing_fixtures::on_devices;
using testing_fixtures::small_mixtral;
using testing_fixtures::small_qwen2moe;
using testing_fixtures::topology_for;

// MoEShard: |Δ logit| allowed against the reference, relative to max(1, |logit|). The shard
// sum changes only the order of the down projection's additions (≈ ffn·2⁻²⁴ relative per
// output element), which the following blocks can amplify a little.
constexpr double kShardLogitTolerance = 1e-4;

using testing_fixtures::Reference;
using testing_fixtures::run_topology;

Reference reference(const Topology& base, int num_requests) {
  return testing_fixtures::reference_for(base, num_requests, 13);
}

// HarMoEny on 2, 3 and 4 devices, paper and code rebalancing, with and without prefetch.
// Experts are all placed on device 0 but one, so device 0 is overloaded and a low threshold
// q makes the schedule move its tokens to the others, which must fetch the experts.
void expect_harmoeny_bitwise(Topology base, int num_requests) {
  const Reference ref = reference(base, num_requests);
  ASSERT_EQ(ref.tokens.size(), static_cast<size_t>(num_requests));
  struct Case {
    int devices;
    std::string rebalance;
    bool prefetch;
    int64_t q;
  };
  const std::vector<Case> cases = {
      {2, "paper", true, 1}, {3, "code", false, 2}, {4, "paper", false, 1}, {4, "code", true, 1}};
  for (const Case& k : cases) {
    Topology t = on_devices(base, k.devices, "harmoeny");
    const int64_t E = base.model.synthetic ? base.model.synthetic->num_experts : 8;
    t.placement = "explicit";
    t.expert_device.assign(E, 0);
    t.expert_device.back() = 1;
    t.harmoeny.rebalance = k.rebalance;
    t.harmoeny.prefetch = k.prefetch;
    t.harmoeny.q = k.q;
    const std::string what = "harmoeny " + std::to_string(k.devices) + " devices, " +
                             k.rebalance + (k.prefetch ? ", prefetch" : ", no prefetch");
    const actors::RunOutcome out = run_topology(t, ref.requests);
    ASSERT_EQ(out.outputs.size(), ref.requests.size()) << what;
    testing_fixtures::expect_outputs_match(out.outputs, ref.tokens, ref.logits, what);
    EXPECT_EQ(out.metrics.num_completed_requests, num_requests) << what;
    // The skewed placement really moved tokens to devices that had to fetch the expert.
    EXPECT_GT(out.metrics.tokens_rebalanced, 0) << what;
    EXPECT_GT(out.metrics.expert_fetches, 0) << what;
    EXPECT_GT(out.metrics.moe_layer.num_samples, 0) << what;
    for (int d = 0; d < k.devices; ++d) {
      EXPECT_GT(out.metrics.device_busy_pct[d], 0.0) << what << ": device " << d << " never ran";
    }
  }
}

void expect_moeshard_matches(Topology base, int num_requests) {
  const Reference ref = reference(base, num_requests);
  ASSERT_EQ(ref.tokens.size(), static_cast<size_t>(num_requests));
  // 5 devices do not divide ffn = 96: the remainder shards are one unit larger.
  for (int devices : {2, 4, 5}) {
    const Topology t = on_devices(base, devices, "moeshard");
    const std::string what = "moeshard " + std::to_string(devices) + " devices";
    const actors::RunOutcome out = run_topology(t, ref.requests);
    ASSERT_EQ(out.outputs.size(), ref.requests.size()) << what;
    double worst = 0.0;
    for (size_t i = 0; i < out.outputs.size(); ++i) {
      EXPECT_EQ(out.outputs[i].output, ref.tokens[i]) << what << ", request " << i;
      const std::vector<float>& got = out.outputs[i].prompt_logits;
      ASSERT_EQ(got.size(), ref.logits[i].size()) << what << ", request " << i;
      for (size_t j = 0; j < got.size(); ++j) {
        const double want = ref.logits[i][j];
        worst = std::max(worst, std::abs(got[j] - want) / std::max(1.0, std::abs(want)));
      }
    }
    EXPECT_LE(worst, kShardLogitTolerance) << what;
    EXPECT_EQ(out.metrics.num_completed_requests, num_requests) << what;
    for (int d = 0; d < devices; ++d) {
      EXPECT_GT(out.metrics.device_busy_pct[d], 0.0) << what << ": device " << d << " never ran";
    }
    // Every device computes a shard of every token: the per-device token counts are equal.
    EXPECT_DOUBLE_EQ(out.metrics.moe_balance, 1.0) << what;
  }
}

TEST(HarmoenyInvariance, SyntheticMixtralTop1) {
  Topology t;
  t.model.synthetic = small_mixtral(1);
  t.model.seed = 41;
  expect_harmoeny_bitwise(t, 8);
}

TEST(HarmoenyInvariance, SyntheticMixtralTop2) {
  Topology t;
  t.model.synthetic = small_mixtral(2);
  t.model.seed = 42;
  expect_harmoeny_bitwise(t, 8);
}

// Top-3 makes the merge order observable in float (see the sync invariance test).
TEST(HarmoenyInvariance, SyntheticMixtralTop3) {
  Topology t;
  t.model.synthetic = small_mixtral(3);
  t.model.seed = 43;
  expect_harmoeny_bitwise(t, 6);
}

TEST(HarmoenyInvariance, SyntheticQwen2MoeSharedExpert) {
  Topology t;
  t.model.synthetic = small_qwen2moe();
  t.model.seed = 44;
  expect_harmoeny_bitwise(t, 6);
}

TEST(MoeShardInvariance, SyntheticMixtralTop1) {
  Topology t;
  t.model.synthetic = small_mixtral(1);
  t.model.seed = 51;
  expect_moeshard_matches(t, 8);
}

TEST(MoeShardInvariance, SyntheticMixtralTop2) {
  Topology t;
  t.model.synthetic = small_mixtral(2);
  t.model.seed = 52;
  expect_moeshard_matches(t, 8);
}

TEST(MoeShardInvariance, SyntheticQwen2MoeSharedExpert) {
  Topology t;
  t.model.synthetic = small_qwen2moe();
  t.model.seed = 53;
  expect_moeshard_matches(t, 6);
}

TEST(HarmoenySetup, SlotsThatCannotHoldTheHomeExpertsAreAnError) {
  Topology t = on_devices(Topology{}, 2, "harmoeny");
  t.model.synthetic = small_mixtral(1);
  t.source = "<test>";
  t.harmoeny.slots = 3;  // round-robin puts 4 of the 8 experts on each device
  absl::StatusOr<std::unique_ptr<actors::Server>> server = actors::Server::create(t);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find(
                "<test>: key 'harmoeny.slots': expected at least 4 (the most experts a device "
                "hosts), got 3"),
            std::string::npos)
      << server.status();
}

TEST(HarmoenySetup, MoreSlotsThanExpertsAreAnError) {
  Topology t = on_devices(Topology{}, 2, "harmoeny");
  t.model.synthetic = small_mixtral(1);
  t.source = "<test>";
  t.harmoeny.slots = 1000000;  // would reserve a million expert-sized buffers per device
  absl::StatusOr<std::unique_ptr<actors::Server>> server = actors::Server::create(t);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find(
                "<test>: key 'harmoeny.slots': expected at most 8 (the model's experts), got "
                "1000000"),
            std::string::npos)
      << server.status();
}

TEST(RebalancedInvariance, TrainedKjvModel) {
  const std::string dir = std::string(MUFLOW_DATA_DIR) + "/models/kjv-mixtral-tiny";
  if (!std::filesystem::exists(dir + "/model.safetensors")) {
    GTEST_SKIP() << "real model not found at " << dir << " (../shared/data absent)";
  }
  Topology t;
  t.model.path = dir;
  t.sampling.stop_at_eos = false;
  expect_harmoeny_bitwise(t, 6);
  expect_moeshard_matches(t, 6);
}

}  // namespace
}  // namespace muflow
