#pragma once
// Shared fixtures of the invariance tests (invariant 1, ARCHITECTURE.md §8): small synthetic
// models, a cpu topology with small batching limits, and concurrent requests with staggered
// arrivals, chunked prefill and mixed lengths.
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "actors/coordinator.hpp"
#include "actors/server.hpp"
#include "engine/exec/reference_decoder.hpp"

#include "engine/model/model_config.hpp"
#include "engine/serving/request.hpp"
#include "engine/serving/sampling.hpp"
#include "engine/topology/topology.hpp"

namespace muflow::testing_fixtures {

using engine::model::ModelConfig;
using engine::serving::Request;
using engine::topology::Topology;

inline ModelConfig small_mixtral(int64_t topk) {
  ModelConfig c;
  c.model_type = engine::model::ModelType::kMixtral;
  c.vocab_size = 211;
  c.hidden_size = 64;
  c.num_layers = 3;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.num_experts = 8;
  c.num_topk = topk;
  c.expert_ffn = 96;
  c.norm_topk_prob = true;
  return c;
}

inline ModelConfig small_qwen2moe() {
  ModelConfig c = small_mixtral(2);
  c.model_type = engine::model::ModelType::kQwen2Moe;
  c.num_experts = 6;
  c.shared_expert_ffn = 80;
  c.attention_bias = true;
  c.norm_topk_prob = false;
  return c;
}

inline Topology topology_for(int num_devices) {
  Topology t;
  t.source = "<test>";
  for (int d = 0; d < num_devices; ++d) t.devices.push_back({"cpu" + std::to_string(d)});
  // Small limits so that requests queue, prefill is chunked, and decode and prefill mix.
  t.scheduler.max_batch_requests = 3;
  t.scheduler.max_prefill_tokens = 7;
  return t;
}

// `base` (its model, sampling, ...) on topology_for(devices)'s devices and scheduler, wired
// `wiring`.
inline Topology on_devices(Topology base, int devices, const std::string& wiring) {
  const Topology cluster = topology_for(devices);
  base.devices = cluster.devices;
  base.scheduler = cluster.scheduler;
  base.wiring = wiring;
  base.source = "<test>";
  return base;
}

// Concurrent requests of different lengths; later ones arrive while earlier ones decode.
inline std::vector<Request> make_requests(int64_t vocab, int64_t bos, int num_requests, uint64_t seed) {
  std::vector<Request> out;
  for (int i = 0; i < num_requests; ++i) {
    Request r;
    r.id = i;
    r.arrival_s = i < 4 ? 0.0 : 0.002 * (i - 3);
    r.max_new_tokens = 6 + (i * 5) % 9;
    r.return_prompt_logits = true;  // compared bitwise: a stronger check than tokens alone
    const int len = 2 + (i * 7 + static_cast<int>(seed)) % 19;
    r.prompt.push_back(static_cast<int32_t>(bos));
    for (int j = 1; j < len; ++j) {
      r.prompt.push_back(static_cast<int32_t>(3 + engine::serving::counter_uniform(seed, i, j) *
                                                      static_cast<double>(vocab - 3)));
    }
    out.push_back(r);
  }
  return out;
}

/// Expects every output to equal the expected tokens and its prompt logits to be bitwise equal
/// (messages prefixed with `what`); returns the number of generated tokens compared.
inline int64_t expect_outputs_match(const std::vector<actors::RequestOutput>& outputs,
                                    const std::vector<std::vector<int32_t>>& tokens,
                                    const std::vector<std::vector<float>>& logits,
                                    const std::string& what) {
  EXPECT_EQ(outputs.size(), tokens.size()) << what;
  int64_t total = 0;
  for (size_t i = 0; i < outputs.size() && i < tokens.size(); ++i) {
    EXPECT_EQ(outputs[i].output, tokens[i]) << what << ", request " << i;
    const std::vector<float>& got = outputs[i].prompt_logits;
    EXPECT_EQ(got.size(), logits[i].size()) << what << ", request " << i;
    if (got.size() == logits[i].size()) {
      EXPECT_EQ(0, std::memcmp(got.data(), logits[i].data(), got.size() * sizeof(float)))
          << what << ", request " << i << ": prompt logits not bitwise equal";
    }
    total += static_cast<int64_t>(outputs[i].output.size());
  }
  return total;
}

/// Runs `requests` on a server built for `t`; a failure is a test failure and gives an empty
/// outcome.
inline actors::RunOutcome run_topology(const Topology& t, const std::vector<Request>& requests) {
  absl::StatusOr<std::unique_ptr<actors::Server>> server = actors::Server::create(t);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return {};
  absl::StatusOr<actors::RunOutcome> out = (*server)->run(requests);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : actors::RunOutcome{};
}

/// The single-device reference (engine::exec::reference_generate) for `num_requests` requests of
/// make_requests(…, seed) on `base`'s model and sampling.
struct Reference {
  std::vector<Request> requests;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<float>> logits;
};

inline Reference reference_for(Topology base, int num_requests, uint64_t seed) {
  base.devices = topology_for(1).devices;
  Reference ref;
  absl::StatusOr<std::unique_ptr<actors::Server>> server = actors::Server::create(base);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return ref;
  const ModelConfig& c = (*server)->config();
  ref.requests = make_requests(c.vocab_size, c.bos_token_id, num_requests, seed);
  for (const Request& r : ref.requests) {
    absl::StatusOr<engine::exec::ReferenceResult> one =
        engine::exec::reference_generate(*(*server)->model(), r, base.sampling, true);
    EXPECT_TRUE(one.ok()) << one.status();
    if (!one.ok()) return ref;
    ref.tokens.push_back(one->output_ids);
    ref.logits.push_back(one->prompt_logits);
  }
  return ref;
}

}  // namespace muflow::testing_fixtures
