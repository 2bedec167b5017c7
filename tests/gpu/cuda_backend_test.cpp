// The cuda backend end to end (issue #20): kjv-mixtral-tiny on the GPU against the cpu
// backend (prompt logits within 1e-3, the same greedy continuation), and invariant 1 on the
// GPU: every wiring, on several virtual devices of one GPU, gives bitwise the same tokens and
// prompt logits (moeshard: the same tokens; its shard sum reorders the down projection's
// additions, as on cpu). Needs a GPU and skips elsewhere, except the test of the error a
// machine without one gets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "actors/backends/backend.hpp"
#include "actors/server.hpp"
#include "engine/exec/cuda_executor.hpp"
#include "engine/model/synthetic_model.hpp"
#include "gpu_test_support.hpp"
#include "integration/invariance_fixtures.hpp"

namespace muflow {
namespace {

using engine::serving::Request;
using engine::topology::Topology;
using testing_fixtures::make_requests;
using testing_fixtures::on_devices;
using testing_fixtures::run_topology;
using testing_fixtures::small_mixtral;
using testing_fixtures::small_qwen2moe;
using testing_fixtures::topology_for;

Topology on_cuda(Topology base, int devices, const std::string& wiring) {
  base = on_devices(std::move(base), devices, wiring);
  for (auto& d : base.devices) d.kind = "cuda";
  base.backend = "cuda";
  return base;
}

TEST(CudaBackend, WithoutAGpuTheBackendSaysSo) {
  std::string why;
  if (kernels::cuda::device_count(&why) > 0) {
    GTEST_SKIP() << "a GPU is present: the other tests of this file cover the backend";
  }
  Topology t = on_cuda(Topology{}, 1, "sync");
  t.model.synthetic = small_mixtral(2);
  absl::StatusOr<std::unique_ptr<actors::Backend>> b = actors::make_backend(t);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(b.status().message()).find("no CUDA device found"), std::string::npos)
      << b.status();
}

TEST(CudaBackend, KjvMixtralTinyLogitsWithin1e3OfCpuAndTheSameGreedyTokens) {
  MUFLOW_REQUIRE_GPU();
  const std::filesystem::path model =
      std::filesystem::path(MUFLOW_DATA_DIR) / "models/kjv-mixtral-tiny";
  if (!std::filesystem::exists(model / "model.safetensors")) {
    GTEST_SKIP() << model << " not found";
  }
  Topology cpu = topology_for(1);
  cpu.model.path = model.string();
  cpu.sampling.stop_at_eos = false;
  Topology cuda = on_cuda(cpu, 1, "sync");
  Request r;
  r.id = 0;
  r.prompt = {1, 415, 2021, 302, 272, 8846, 28725, 304, 272, 2195, 403};
  for (int32_t& id : r.prompt) id = id % 4096;
  r.max_new_tokens = 48;
  r.return_prompt_logits = true;
  const actors::RunOutcome on_cpu = run_topology(cpu, {r});
  const actors::RunOutcome on_gpu = run_topology(cuda, {r});
  ASSERT_EQ(on_cpu.outputs.size(), 1u);
  ASSERT_EQ(on_gpu.outputs.size(), 1u);
  const std::vector<float>& a = on_cpu.outputs[0].prompt_logits;
  const std::vector<float>& b = on_gpu.outputs[0].prompt_logits;
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double{a[i]} - b[i]));
  std::printf("[cuda] kjv-mixtral-tiny prompt logits: max |cuda - cpu| = %.3g over %zu values\n",
              worst, a.size());
  EXPECT_LE(worst, 1e-3);
  EXPECT_EQ(on_gpu.outputs[0].output, on_cpu.outputs[0].output);
  EXPECT_EQ(on_gpu.outputs[0].output.size(), 48u);
}

struct WiringCase {
  std::string wiring;
  int devices;
  int64_t attention_devices = 0;
  std::vector<int64_t> replicated = {};  ///< async-replicated: experts on every expert device
};

// Every wiring on the GPU against sync on one virtual device: bitwise tokens and prompt
// logits (moeshard: tokens). `cpu_tokens`: also the same tokens as the cpu backend (f32).
void expect_every_wiring_alike(Topology base, bool cpu_tokens) {
  Topology one = on_cuda(base, 1, "sync");
  absl::StatusOr<std::unique_ptr<actors::Server>> server = actors::Server::create(one);
  ASSERT_TRUE(server.ok()) << server.status();
  const engine::model::ModelConfig& c = (*server)->config();
  const std::vector<Request> requests = make_requests(c.vocab_size, c.bos_token_id, 9, 17);
  absl::StatusOr<actors::RunOutcome> first = (*server)->run(requests);
  ASSERT_TRUE(first.ok()) << first.status();
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<float>> logits;
  for (const actors::RequestOutput& o : first->outputs) {
    ASSERT_FALSE(o.output.empty());
    tokens.push_back(o.output);
    logits.push_back(o.prompt_logits);
  }
  if (cpu_tokens) {
    Topology cpu = base;
    cpu.devices = topology_for(1).devices;
    cpu.scheduler = topology_for(1).scheduler;
    const actors::RunOutcome on_cpu = run_topology(cpu, requests);
    ASSERT_EQ(on_cpu.outputs.size(), requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(on_cpu.outputs[i].output, tokens[i]) << "cpu vs cuda, request " << i;
    }
  }
  const std::vector<WiringCase> cases = {{"sync", 2},
                                         {"sync", 4},
                                         {"async", 3, 1},
                                         {"harmoeny", 3},
                                         {"exflow", 2},
                                         {"moeshard", 2},
                                         {"async-replicated", 3, 1, {0, 3}}};
  for (const WiringCase& k : cases) {
    Topology t = on_cuda(base, k.devices, k.wiring);
    t.attention_devices = k.attention_devices;
    t.replica_experts = k.replicated;
    const std::string what = k.wiring + " on " + std::to_string(k.devices) + " virtual devices";
    const actors::RunOutcome out = run_topology(t, requests);
    ASSERT_EQ(out.outputs.size(), requests.size()) << what;
    if (k.wiring == "moeshard") {
      for (size_t i = 0; i < requests.size(); ++i) {
        EXPECT_EQ(out.outputs[i].output, tokens[i]) << what << ", request " << i;
      }
    } else {
      testing_fixtures::expect_outputs_match(out.outputs, tokens, logits, what);
    }
  }
}

TEST(CudaBackend, EveryWiringGivesTheSameTokensOnOneGpuF32) {
  MUFLOW_REQUIRE_GPU();
  Topology t;
  t.model.synthetic = small_mixtral(2);
  t.model.seed = 31;
  expect_every_wiring_alike(t, /*cpu_tokens=*/true);
}

TEST(CudaBackend, EveryWiringGivesTheSameTokensOnOneGpuBf16) {
  MUFLOW_REQUIRE_GPU();
  Topology t;
  t.model.synthetic = small_mixtral(2);
  t.model.seed = 32;
  t.model.dtype = "bf16";
  expect_every_wiring_alike(t, /*cpu_tokens=*/false);
}

TEST(CudaBackend, SharedExpertAndAttentionBiasModel) {
  MUFLOW_REQUIRE_GPU();
  Topology t;
  t.model.synthetic = small_qwen2moe();
  t.model.seed = 33;
  expect_every_wiring_alike(t, /*cpu_tokens=*/true);
}

// The executor's paged KV mirror: a position that does not continue the host cache is an
// error (nothing written); rows that reached a host cache without the device (a replica)
// are uploaded before attention reads them, bitwise as if computed there; a released
// request's pages are reused.
TEST(CudaExecutorKv, MirrorFollowsTheHostCache) {
  MUFLOW_REQUIRE_GPU();
  const engine::model::ModelConfig c = small_mixtral(2);
  const engine::model::ModelWeights w =
      engine::model::make_synthetic_model(c, 41, engine::model::DType::kF32);
  absl::StatusOr<std::shared_ptr<const engine::exec::CudaModel>> model =
      engine::exec::CudaModel::prepare(w, 0);
  ASSERT_TRUE(model.ok()) << model.status();
  const int64_t H = c.hidden_size, K = c.num_topk, kvd = c.num_kv_heads * c.head_dim;
  auto rows = [&](int64_t rid, int64_t from, int64_t to) {
    std::vector<engine::dataflow::TokenMeta> t;
    for (int64_t p = from; p < to; ++p) t.push_back({.request_id = rid, .position = p});
    return t;
  };
  auto hidden = [&](int64_t n, float seed) {
    std::vector<float> h(n * H);
    for (size_t i = 0; i < h.size(); ++i) h[i] = std::sin(seed + 0.37f * static_cast<float>(i));
    return h;
  };
  struct Out {
    std::vector<float> h, x, w;
    std::vector<int32_t> ids;
  };
  auto attend = [&](engine::exec::CudaExecutor& e, engine::serving::KvCache& kv,
                    const std::vector<engine::dataflow::TokenMeta>& t, std::vector<float> h,
                    absl::Status* status) {
    const auto n = static_cast<int64_t>(t.size());
    Out o{std::move(h), std::vector<float>(n * H), std::vector<float>(n * K),
          std::vector<int32_t>(n * K)};
    double seconds = -1.0;
    *status = e.attention(0, kv, t, o.h.data(), {o.x.data(), o.ids.data(), o.w.data(), nullptr},
                          &seconds);
    EXPECT_EQ(seconds, 0.0);
    return o;
  };
  engine::exec::CudaExecutor a(*model), b(*model);
  engine::serving::KvCache kv(kvd), replica(kvd);
  absl::Status s;
  attend(a, kv, rows(7, 3, 4), hidden(1, 0.f), &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(kv.length(7), 0);
  attend(a, kv, rows(7, 0, 5), hidden(5, 1.f), &s);  // prefill 5
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(kv.length(7), 5);
  // The replica's host cache gets the rows the way KvRows do; executor b never saw them.
  for (int64_t p = 0; p < 5; ++p) {
    ASSERT_TRUE(replica.append(7, p, kv.keys(7) + p * kvd, kv.values(7) + p * kvd));
  }
  // sync_kv uploads them ahead (what calibration does before timing); attention then finds
  // the device copy current.
  ASSERT_TRUE(b.sync_kv(replica, {7}).ok());
  const int64_t pages_b = b.kv_pages_in_use();
  EXPECT_EQ(pages_b, 1);
  const std::vector<float> h6 = hidden(1, 2.f);
  const Out on_a = attend(a, kv, rows(7, 5, 6), h6, &s);
  ASSERT_TRUE(s.ok()) << s;
  const Out on_b = attend(b, replica, rows(7, 5, 6), h6, &s);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(0, std::memcmp(on_a.h.data(), on_b.h.data(), H * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(on_a.x.data(), on_b.x.data(), H * sizeof(float)));
  EXPECT_EQ(on_a.ids, on_b.ids);
  EXPECT_EQ(0, std::memcmp(kv.keys(7), replica.keys(7), 6 * kvd * sizeof(float)));
  // Released, then restarted from position 0: the device drops the old rows and reuses pages.
  const int64_t pages = a.kv_pages_in_use();
  for (int round = 0; round < 3; ++round) {
    kv.release(7);
    attend(a, kv, rows(7, 0, 6), hidden(6, 3.f), &s);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(a.kv_pages_in_use(), pages) << "round " << round;
  }
}

}  // namespace
}  // namespace muflow
