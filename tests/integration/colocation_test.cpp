// Two MoE models served together on one cluster (Aurora §6, Server::run_colocated): every
// device's actor multiplexes both models' stages. Sharing devices changes when tokens come
// out, never which: each model's tokens (and, on cpu, prompt logits) equal its own
// single-device reference. In the sim, pairing the models' experts by bottleneck matching
// (engine/planning/aurora_placement.hpp) finishes sooner than pairing hot with hot.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "actors/placement_setup.hpp"
#include "actors/server.hpp"
#include "engine/planning/aurora_placement.hpp"
#include "engine/model/model_presets.hpp"
#include "invariance_fixtures.hpp"

namespace muflow {
namespace {

using engine::topology::Topology;
using testing_fixtures::small_mixtral;
using testing_fixtures::topology_for;

TEST(Colocation, TwoCpuModelsKeepTheirReferenceTokens) {
  Topology a = topology_for(2);
  a.model.synthetic = small_mixtral(1);
  a.model.seed = 71;
  Topology b = topology_for(2);
  b.model.synthetic = small_mixtral(2);
  b.model.seed = 72;
  b.wiring = "exflow";  // each model keeps its own wiring
  const testing_fixtures::Reference ref_a = testing_fixtures::reference_for(a, 6, 5);
  const testing_fixtures::Reference ref_b = testing_fixtures::reference_for(b, 7, 6);
  auto sa = actors::Server::create(a);
  auto sb = actors::Server::create(b);
  ASSERT_TRUE(sa.ok() && sb.ok()) << sa.status() << sb.status();
  auto both = (*sa)->run_colocated(**sb, ref_a.requests, ref_b.requests);
  ASSERT_TRUE(both.ok()) << both.status();
  testing_fixtures::expect_outputs_match(both->first.outputs, ref_a.tokens, ref_a.logits,
                                         "colocated model a");
  testing_fixtures::expect_outputs_match(both->second.outputs, ref_b.tokens, ref_b.logits,
                                         "colocated model b");
  EXPECT_EQ(both->first.metrics.num_completed_requests, 6);
  EXPECT_EQ(both->second.metrics.num_completed_requests, 7);
}

Topology switch8(uint64_t router_seed) {
  Topology t;
  t.source = "<switch8 " + std::to_string(router_seed) + ">";
  t.backend = "sim";
  for (int d = 0; d < 8; ++d) t.devices.push_back({"a" + std::to_string(d), "A100-80GB"});
  absl::StatusOr<engine::model::ModelConfig> c = engine::model::model_preset("switch-base-8");
  EXPECT_TRUE(c.ok());
  t.model.synthetic = *c;
  t.model.preset = "switch-base-8";
  t.model.dtype = "bf16";
  t.router.kind = "harmoeny-skew";  // experts 0 and 1 get 60% of both models' tokens
  t.router.skew = 0.6;
  t.router.skew_mode = "share";
  t.router.hot_experts = 2;
  t.router.seed = router_seed;
  t.scheduler.max_prefill_tokens = 8192;
  t.sampling.stop_at_eos = false;
  return t;
}

std::vector<engine::serving::Request> prefills(int n, int len, int out) {
  std::vector<engine::serving::Request> r(n);
  for (int i = 0; i < n; ++i) {
    r[i].id = i;
    r[i].max_new_tokens = out;
    for (int p = 0; p < len; ++p) r[i].prompt.push_back(3 + (i * 13 + p * 5) % 900);
  }
  return r;
}

TEST(Colocation, BottleneckPairingBeatsHotWithHotInTheSim) {
  const Topology a = switch8(1);
  Topology b = switch8(2);
  const std::vector<engine::serving::Request> requests = prefills(48, 256, 4);
  auto solo = [&](const Topology& t) {
    auto s = actors::Server::create(t);
    EXPECT_TRUE(s.ok()) << s.status();
    auto out = (*s)->run(requests);
    EXPECT_TRUE(out.ok()) << out.status();
    return *out;
  };
  const actors::RunOutcome solo_a = solo(a), solo_b = solo(b);
  auto colocated = [&](const Topology& second) {
    auto sa = actors::Server::create(a);
    auto sb = actors::Server::create(second);
    EXPECT_TRUE(sa.ok() && sb.ok());
    auto both = (*sa)->run_colocated(**sb, requests, requests);
    EXPECT_TRUE(both.ok()) << both.status();
    return *both;
  };
  // Identity pairing: expert i of both models on device i, so both hot experts share devices.
  const auto hot_with_hot = colocated(b);
  // Bottleneck matching of the sampled expert loads (Theorem 6.2's case: symmetric loads).
  auto sa = actors::Server::create(a);
  auto sb = actors::Server::create(b);
  ASSERT_TRUE(sa.ok() && sb.ok());
  auto router_of = [](const Topology& t) {
    return engine::routing::make_router_model(t.router, 8, 1, 6);
  };
  auto ra = router_of(a), rb = router_of(b);
  ASSERT_TRUE(ra.ok() && rb.ok());
  const auto la = actors::sample_expert_loads(**ra, (*sa)->placement(), 256);
  const auto lb = actors::sample_expert_loads(**rb, (*sb)->placement(), 256);
  auto plan = engine::planning::colocate_bottleneck(la, lb);
  ASSERT_TRUE(plan.ok()) << plan.status();
  b.placement = "explicit";
  b.expert_device.assign(8, -1);
  for (const engine::planning::ExpertPair& p : plan->pairs) {
    b.expert_device[p.b] = (*sa)->placement().expert_device[p.a];
  }
  EXPECT_NE(b.expert_device[0], 0) << "the hot expert 0 of b must leave a's hot expert 0";
  const auto matched = colocated(b);

  for (const auto* run : {&hot_with_hot, &matched}) {
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(run->first.outputs[i].output, solo_a.outputs[i].output);
      EXPECT_EQ(run->second.outputs[i].output, solo_b.outputs[i].output);
    }
    // Sharing the devices costs time.
    EXPECT_GT(run->first.metrics.duration_s, solo_a.metrics.duration_s);
  }
  EXPECT_LT(matched.first.metrics.duration_s, hot_with_hot.first.metrics.duration_s);
  EXPECT_LT(matched.second.metrics.duration_s, hot_with_hot.second.metrics.duration_s);
  std::printf("duration ms: solo %.3f / %.3f, hot with hot %.3f / %.3f, matched %.3f / %.3f\n",
              solo_a.metrics.duration_s * 1e3, solo_b.metrics.duration_s * 1e3,
              hot_with_hot.first.metrics.duration_s * 1e3,
              hot_with_hot.second.metrics.duration_s * 1e3, matched.first.metrics.duration_s * 1e3,
              matched.second.metrics.duration_s * 1e3);
}

TEST(Colocation, DifferentClustersOrBackendsAreErrors) {
  Topology a = switch8(1);
  Topology b = switch8(2);
  b.devices.pop_back();
  b.expert_device.clear();
  b.model.synthetic->num_experts = 7;  // keep b valid on 7 devices
  b.model.preset.clear();
  auto sa = actors::Server::create(a);
  auto sb = actors::Server::create(b);
  ASSERT_TRUE(sa.ok() && sb.ok()) << sb.status();
  auto both = (*sa)->run_colocated(**sb, prefills(2, 8, 1), prefills(2, 8, 1));
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("must declare the same devices"), std::string::npos)
      << both.status();
  Topology c = topology_for(8);
  c.model.synthetic = small_mixtral(1);
  auto sc = actors::Server::create(c);
  ASSERT_TRUE(sc.ok());
  both = (*sa)->run_colocated(**sc, prefills(2, 8, 1), prefills(2, 8, 1));
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("runs backend 'sim' but"), std::string::npos)
      << both.status();
}

}  // namespace
}  // namespace muflow
