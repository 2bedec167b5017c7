// The sim executor's attention (engine/exec/sim_executor.hpp): the modeled duration is the
// roofline of one sequence per request, whatever order the batch holds its requests' tokens
// in; the KV cache's continuation check; routing by (block, request, position) alone.

#include "engine/exec/sim_executor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/model_presets.hpp"
#include "engine/routing/router_categorical.hpp"
#include "engine/serving/kv_cache.hpp"
#include "kernels/sim/measured_kernels.hpp"
#include "kernels/sim/op_cost.hpp"
#include "scratch_path.hpp"

namespace muflow::engine {
namespace {

using dataflow::TokenMeta;

struct Attended {
  double seconds = 0;
  std::vector<int32_t> ids;  // [tokens, K]
};

class SimExecutorAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<model::ModelConfig> cfg = model::model_preset("mixtral-8x7b");
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    config_ = *cfg;
    absl::StatusOr<kernels::sim::DeviceKind> kind = kernels::sim::find_device_kind("H100-SXM");
    ASSERT_TRUE(kind.ok()) << kind.status();
    kind_ = *kind;
    routing::RouterSpec spec;
    spec.kind = "uniform";
    auto router = routing::make_categorical_router(spec, config_.num_experts, config_.num_topk,
                                                   config_.num_layers);
    ASSERT_TRUE(router.ok()) << router.status();
    cost_ = std::make_shared<kernels::sim::CostModel>();
    router_ = std::move(*router);
    exec_ = std::make_unique<exec::SimExecutor>(config_, kind_, cost_, router_,
                                                kernels::sim::Precision::kBF16);
  }

  // Attention of `tokens` at block 3 on a cache that already holds `cached` (request, length).
  absl::StatusOr<Attended> attend(const std::vector<std::pair<int64_t, int64_t>>& tokens,
                                  const std::vector<std::pair<int64_t, int64_t>>& cached = {}) {
    serving::KvCache kv(0);
    for (const auto& [request, len] : cached) {
      for (int64_t p = 0; p < len; ++p) EXPECT_TRUE(kv.append(request, p, nullptr, nullptr));
    }
    std::vector<TokenMeta> meta;
    for (const auto& [request, position] : tokens) {
      TokenMeta m;
      m.request_id = request;
      m.position = position;
      meta.push_back(m);
    }
    Attended a;
    const int64_t K = config_.num_topk;
    a.ids.assign(meta.size() * K, -1);
    std::vector<float> w(meta.size() * K);
    exec::AttentionResult out{nullptr, a.ids.data(), w.data(), nullptr};
    if (absl::Status s = exec_->attention(3, kv, meta, nullptr, out, &a.seconds); !s.ok()) {
      return s;
    }
    return a;
  }

  // The roofline for one sequence per (num_tokens, context_len).
  double roofline(const std::vector<kernels::sim::AttentionSequence>& seqs, int64_t n) const {
    const kernels::sim::AttentionDims dims{config_.hidden_size, config_.num_heads,
                                           config_.num_kv_heads, config_.head_dim};
    const kernels::sim::OpCost cost =
        kernels::sim::attention_cost(dims, seqs, kernels::sim::Precision::kBF16) +
        kernels::sim::router_cost(n, config_.hidden_size, config_.num_experts,
                                  kernels::sim::Precision::kBF16);
    return cost_->seconds(kind_, kernels::sim::Precision::kBF16, cost, n);
  }

  model::ModelConfig config_;
  kernels::sim::DeviceKind kind_;
  std::shared_ptr<kernels::sim::CostModel> cost_;
  std::shared_ptr<const routing::RouterModel> router_;
  std::unique_ptr<exec::SimExecutor> exec_;
};

TEST_F(SimExecutorAttention, OneSequencePerRequestWhateverTheOrderOfItsTokens) {
  ASSERT_EQ(config_.shared_expert_ffn, 0) << "the roofline below leaves the shared expert out";
  // Request 4: a 3-token prefill chunk after 5 cached positions; request 9: a 2-token prompt;
  // request 2: one decode token after 40.
  const std::vector<std::pair<int64_t, int64_t>> cached = {{4, 5}, {2, 40}};
  const std::vector<std::pair<int64_t, int64_t>> ascending = {{2, 40}, {4, 5}, {4, 6},
                                                              {4, 7},  {9, 0}, {9, 1}};
  const std::vector<std::pair<int64_t, int64_t>> descending = {{9, 0}, {9, 1}, {4, 5},
                                                               {4, 6}, {4, 7}, {2, 40}};
  // Runs of one request that are not adjacent (each request's positions still in order).
  const std::vector<std::pair<int64_t, int64_t>> interleaved = {{4, 5},  {9, 0}, {4, 6},
                                                                {2, 40}, {9, 1}, {4, 7}};
  absl::StatusOr<Attended> a = attend(ascending, cached);
  ASSERT_TRUE(a.ok()) << a.status();
  const double expected = roofline({{1, 41}, {3, 8}, {2, 2}}, 6);
  EXPECT_GT(expected, 0.0);
  EXPECT_EQ(a->seconds, expected);
  for (const auto& order : {descending, interleaved}) {
    absl::StatusOr<Attended> b = attend(order, cached);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->seconds, expected);
    // Each token's experts depend on (block, request, position) only.
    for (size_t i = 0; i < order.size(); ++i) {
      const size_t j = static_cast<size_t>(std::find(ascending.begin(), ascending.end(), order[i]) -
                                           ascending.begin());
      for (int64_t k = 0; k < config_.num_topk; ++k) {
        EXPECT_EQ(b->ids[i * config_.num_topk + k], a->ids[j * config_.num_topk + k]);
      }
    }
  }
  // The check can fail: request 4's tokens counted as the separate runs they came in would
  // cost another duration (their KV rows read once per run).
  EXPECT_NE(roofline({{1, 41}, {1, 6}, {2, 8}, {2, 2}}, 6), expected);
}

TEST_F(SimExecutorAttention, ATokenThatDoesNotContinueItsCacheIsAnError) {
  absl::StatusOr<Attended> a = attend({{4, 0}, {4, 2}});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(a.status().message().find("request 4 position 2"), std::string::npos) << a.status();
}

TEST_F(SimExecutorAttention, AnEmptyBatchCostsNothing) {
  absl::StatusOr<Attended> a = attend({});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->seconds, roofline({}, 0));
  EXPECT_EQ(a->seconds, 0.0);
}

// With measured kernel times (`[cost] kernels`) the prefill sequences' times are summed in
// the list's order: ascending request id, whatever order the batch holds them in. The
// measured prefill curve is interpolated at non-integer points, so the sum's order shows.
TEST_F(SimExecutorAttention, MeasuredTimesSumTheSequencesInAscendingRequestOrder) {
  const std::string path = muflow::testing::scratch_path("sim_executor_measured.csv").string();
  {
    std::ofstream f(path);
    f << "# muflow calibrate: test\n"
         "# kind=cpu hidden=64 ffn=128 heads=4 kv_heads=2 head_dim=16 experts=4 topk=2 "
         "vocab=256 gated=1 dtype=f32 threads=1 concurrent=1\n"
         "op,tokens,context,width,seconds\n"
         "attention,1,1,0,1.3e-05\nattention,16,1,0,4.1e-05\nattention,1,128,0,7.7e-05\n"
         "attention,16,128,0,1.07e-03\n"
         "prefill,3,3,0,4.99e-05\nprefill,11,11,0,2.22e-04\nprefill,37,37,0,8.73e-04\n"
         "expert,1,0,128,2.3e-05\nexpert,64,0,128,2.1e-04\n"
         "lm_head,1,0,0,6e-06\nlm_head,8,0,0,1.3e-05\nstage_overhead,0,0,0,7e-06\n";
  }
  absl::StatusOr<kernels::sim::MeasuredKernels> m = kernels::sim::MeasuredKernels::read_csv(path);
  ASSERT_TRUE(m.ok()) << m.status();
  auto measured = std::make_shared<const kernels::sim::MeasuredKernels>(*std::move(m));
  exec_ = std::make_unique<exec::SimExecutor>(config_, kind_, cost_, router_,
                                              kernels::sim::Precision::kBF16, measured);
  // Three prefill chunks (requests 8, 3, 5) and one decode token (request 6).
  const std::vector<std::pair<int64_t, int64_t>> cached = {{3, 4}, {6, 20}};
  std::vector<std::pair<int64_t, int64_t>> ascending;
  for (int64_t p = 4; p < 9; ++p) ascending.push_back({3, p});
  for (int64_t p = 0; p < 7; ++p) ascending.push_back({5, p});
  ascending.push_back({6, 20});
  for (int64_t p = 0; p < 13; ++p) ascending.push_back({8, p});
  const double expected = measured->attention_seconds(
      std::vector<kernels::sim::AttentionSequence>{{5, 9}, {7, 7}, {1, 21}, {13, 13}});
  EXPECT_GT(expected, 0.0);
  // The check can fail: summed in descending request order, the times differ (a long
  // sequence's time next to short ones' loses low bits in another place).
  EXPECT_NE(measured->attention_seconds(
                std::vector<kernels::sim::AttentionSequence>{{13, 13}, {1, 21}, {7, 7}, {5, 9}}),
            expected);
  std::vector<std::pair<int64_t, int64_t>> descending;
  for (int64_t r : {8, 6, 5, 3}) {
    for (const auto& t : ascending) {
      if (t.first == r) descending.push_back(t);
    }
  }
  for (const auto& order : {ascending, descending}) {
    absl::StatusOr<Attended> a = attend(order, cached);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->seconds, expected);
  }
}

}  // namespace
}  // namespace muflow::engine
