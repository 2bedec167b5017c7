// The single-device reference decoder (engine/exec/reference_decoder.hpp) and the stage math it
// calls (engine/exec/cpu_model.hpp), on small synthetic mixtral and qwen2_moe models built in
// memory: output lengths and EOS, prompt logits, greedy tokens against argmax of a full
// forward pass done here with CpuModel, bitwise equality of incremental decoding and one
// full prefill (batch invariance), and input validation.

#include "engine/exec/reference_decoder.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/exec/cpu_model.hpp"
#include "engine/model/synthetic_model.hpp"
#include "kernels/reference/test_inputs.hpp"

namespace muflow::engine {
namespace {

using kernels::reference::test_seed;
using ::testing::HasSubstr;

model::ModelConfig small_config(model::ModelType type) {
  model::ModelConfig c;
  c.model_type = type;
  c.vocab_size = 97;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.num_experts = 4;
  c.num_topk = 2;
  c.expert_ffn = 48;
  if (type == model::ModelType::kQwen2Moe) {
    c.shared_expert_ffn = 24;
    c.attention_bias = true;
    c.norm_topk_prob = false;
  }
  return c;
}

std::shared_ptr<const exec::CpuModel> build_model(const model::ModelConfig& c, uint64_t seed) {
  const absl::Status valid = c.validate();
  EXPECT_TRUE(valid.ok()) << valid;
  if (!valid.ok()) return nullptr;
  auto weights = std::make_shared<const model::ModelWeights>(
      model::make_synthetic_model(c, seed, model::DType::kF32));
  absl::StatusOr<std::shared_ptr<const exec::CpuModel>> model = exec::CpuModel::prepare(weights);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

/// Per-request decoding state for the direct CpuModel path: one KV cache per block.
struct DirectState {
  std::vector<serving::KvCache> caches;
  explicit DirectState(const model::ModelConfig& c)
      : caches(c.num_layers, serving::KvCache(c.num_kv_heads * c.head_dim)) {}
};

struct ForwardOut {
  std::vector<float> logits;                     ///< [n, vocab]
  std::vector<std::vector<int32_t>> expert_ids;  ///< [num_layers][n * num_topk]
};

/// Runs `tokens` (positions start_pos..) of request `rid` through every block with CpuModel's
/// stage functions, combining each token's top-k outputs in rank order.
ForwardOut forward(const exec::CpuModel& m, DirectState& st, int64_t rid,
                   const std::vector<int32_t>& tokens, int64_t start_pos) {
  const model::ModelConfig& c = m.config();
  const int64_t n = static_cast<int64_t>(tokens.size()), H = c.hidden_size, K = c.num_topk;
  std::vector<int64_t> rids(n, rid), pos(n);
  for (int64_t i = 0; i < n; ++i) pos[i] = start_pos + i;
  std::vector<float> h(n * H), x(n * H), w(n * K), shared(c.shared_expert_ffn > 0 ? n * H : 0);
  std::vector<int32_t> ids(n * K);
  ForwardOut out;
  m.embed(tokens.data(), n, h.data());
  for (int64_t b = 0; b < c.num_layers; ++b) {
    exec::AttentionOutputs ao{x.data(), ids.data(), w.data(),
                              shared.empty() ? nullptr : shared.data()};
    const absl::Status s = m.attention(b, st.caches[b], rids.data(), pos.data(), n, h.data(), ao);
    EXPECT_TRUE(s.ok()) << s;
    out.expert_ids.push_back(ids);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<std::vector<float>> y(K, std::vector<float>(H));
      std::vector<const float*> rows(K);
      for (int64_t j = 0; j < K; ++j) {
        const int32_t e = ids[i * K + j];
        EXPECT_GE(e, 0);
        EXPECT_LT(e, c.num_experts);
        m.expert(b, e, x.data() + i * H, 1, y[j].data());
        rows[j] = y[j].data();
      }
      exec::CpuModel::combine_row(h.data() + i * H, rows.data(), w.data() + i * K, K,
                                  shared.empty() ? nullptr : shared.data() + i * H, H);
    }
  }
  out.logits.resize(n * c.vocab_size);
  m.logits(h.data(), n, out.logits.data());
  return out;
}

int32_t argmax(const float* row, int64_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

bool bitwise_equal(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

std::vector<int32_t> random_prompt(uint64_t seed, int64_t len, int64_t vocab) {
  kernels::reference::SplitMix64 rng(seed);
  std::vector<int32_t> p(len);
  for (int32_t& t : p) t = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(vocab));
  return p;
}

class ReferenceDecoderTest : public ::testing::TestWithParam<model::ModelType> {
 protected:
  void SetUp() override {
    config_ = small_config(GetParam());
    seed_ = test_seed(
        ("ReferenceDecoderTest/" + std::string(model::model_type_name(GetParam()))).c_str(),
        20250101);
    model_ = build_model(config_, seed_);
    ASSERT_NE(model_, nullptr);
    prompt_ = random_prompt(seed_ ^ 0xabcdef, 7, config_.vocab_size);
  }
  serving::Request request(int64_t max_new) const {
    serving::Request r;
    r.id = 3;
    r.prompt = prompt_;
    r.max_new_tokens = max_new;
    return r;
  }
  model::ModelConfig config_;
  uint64_t seed_ = 0;
  std::shared_ptr<const exec::CpuModel> model_;
  std::vector<int32_t> prompt_;
};

TEST_P(ReferenceDecoderTest, GreedyMatchesArgmaxOfDirectForward) {
  topology::SamplingSpec greedy;
  greedy.stop_at_eos = false;
  const int64_t max_new = 6;
  absl::StatusOr<exec::ReferenceResult> r =
      exec::reference_generate(*model_, request(max_new), greedy, true);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(static_cast<int64_t>(r->output_ids.size()), max_new);
  const int64_t V = config_.vocab_size, P = static_cast<int64_t>(prompt_.size());
  ASSERT_EQ(static_cast<int64_t>(r->prompt_logits.size()), P * V);

  // One full forward pass over prompt + generated tokens (all but the last, never fed back).
  std::vector<int32_t> seq = prompt_;
  seq.insert(seq.end(), r->output_ids.begin(), r->output_ids.end() - 1);
  DirectState st(config_);
  const ForwardOut full = forward(*model_, st, 3, seq, 0);
  // Prompt logits are those of the prompt positions, bitwise.
  EXPECT_TRUE(bitwise_equal(r->prompt_logits.data(), full.logits.data(), P * V));
  // Each generated token is the argmax at the position before it.
  for (int64_t i = 0; i < max_new; ++i) {
    EXPECT_EQ(r->output_ids[i], argmax(full.logits.data() + (P - 1 + i) * V, V)) << i;
  }
  // Expert choices: every computed position, every block.
  ASSERT_EQ(static_cast<int64_t>(r->expert_ids.size()), config_.num_layers);
  for (int64_t b = 0; b < config_.num_layers; ++b) {
    EXPECT_EQ(r->expert_ids[b], full.expert_ids[b]) << "block " << b;
  }
  // Not requested → empty.
  absl::StatusOr<exec::ReferenceResult> no_logits =
      exec::reference_generate(*model_, request(max_new), greedy, false);
  ASSERT_TRUE(no_logits.ok());
  EXPECT_TRUE(no_logits->prompt_logits.empty());
  EXPECT_EQ(no_logits->output_ids, r->output_ids);
}

TEST_P(ReferenceDecoderTest, StopsAtEosWhenAsked) {
  topology::SamplingSpec greedy;
  greedy.stop_at_eos = false;
  absl::StatusOr<exec::ReferenceResult> free_run =
      exec::reference_generate(*model_, request(5), greedy, false);
  ASSERT_TRUE(free_run.ok()) << free_run.status();
  ASSERT_EQ(free_run->output_ids.size(), 5u);
  // Make the third generated token the EOS id of an otherwise identical model.
  model::ModelConfig c = config_;
  c.eos_token_id = free_run->output_ids[2];
  std::shared_ptr<const exec::CpuModel> eos_model = build_model(c, seed_);
  ASSERT_NE(eos_model, nullptr);
  std::vector<int32_t> expected;
  for (int32_t t : free_run->output_ids) {
    expected.push_back(t);
    if (t == c.eos_token_id) break;
  }
  topology::SamplingSpec stop = greedy;
  stop.stop_at_eos = true;
  absl::StatusOr<exec::ReferenceResult> stopped =
      exec::reference_generate(*eos_model, request(5), stop, false);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped->output_ids, expected);
  EXPECT_LE(stopped->output_ids.size(), 3u);
  // Without stop_at_eos it runs to max_new_tokens.
  absl::StatusOr<exec::ReferenceResult> full =
      exec::reference_generate(*eos_model, request(5), greedy, false);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->output_ids, free_run->output_ids);
}

TEST_P(ReferenceDecoderTest, IncrementalDecodeBitwiseEqualsFullPrefill) {
  const int64_t V = config_.vocab_size;
  const std::vector<int32_t> seq = random_prompt(seed_ ^ 0x1234, 12, V);
  const int64_t n = static_cast<int64_t>(seq.size());
  DirectState full_state(config_);
  const ForwardOut full = forward(*model_, full_state, 5, seq, 0);
  for (int64_t p : {1, 4}) {
    SCOPED_TRACE(p);
    DirectState st(config_);
    std::vector<float> logits;
    std::vector<std::vector<int32_t>> ids(config_.num_layers);
    const ForwardOut pre =
        forward(*model_, st, 5, std::vector<int32_t>(seq.begin(), seq.begin() + p), 0);
    logits = pre.logits;
    for (int64_t b = 0; b < config_.num_layers; ++b) ids[b] = pre.expert_ids[b];
    for (int64_t i = p; i < n; ++i) {
      const ForwardOut step = forward(*model_, st, 5, {seq[i]}, i);
      logits.insert(logits.end(), step.logits.begin(), step.logits.end());
      for (int64_t b = 0; b < config_.num_layers; ++b) {
        ids[b].insert(ids[b].end(), step.expert_ids[b].begin(), step.expert_ids[b].end());
      }
    }
    ASSERT_EQ(logits.size(), full.logits.size());
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_TRUE(bitwise_equal(logits.data() + i * V, full.logits.data() + i * V, V))
          << "position " << i;
    }
    for (int64_t b = 0; b < config_.num_layers; ++b) EXPECT_EQ(ids[b], full.expert_ids[b]);
    for (int64_t b = 0; b < config_.num_layers; ++b) {
      EXPECT_EQ(st.caches[b].length(5), n);
      EXPECT_TRUE(bitwise_equal(st.caches[b].keys(5), full_state.caches[b].keys(5),
                                n * config_.num_kv_heads * config_.head_dim));
    }
  }
  // Sanity: the logits are not degenerate (distinct positions give distinct rows).
  EXPECT_FALSE(bitwise_equal(full.logits.data(), full.logits.data() + V, V));
}

TEST_P(ReferenceDecoderTest, SeededSamplingIsReproducible) {
  topology::SamplingSpec s;
  s.temperature = 1.0;
  s.seed = seed_;
  s.stop_at_eos = false;
  absl::StatusOr<exec::ReferenceResult> a = exec::reference_generate(*model_, request(8), s, false);
  absl::StatusOr<exec::ReferenceResult> b = exec::reference_generate(*model_, request(8), s, false);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->output_ids, b->output_ids);
  EXPECT_EQ(a->output_ids.size(), 8u);
  for (int32_t t : a->output_ids) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, config_.vocab_size);
  }
}

TEST_P(ReferenceDecoderTest, InvalidPrompts) {
  topology::SamplingSpec greedy;
  serving::Request r = request(3);
  r.prompt.clear();
  absl::StatusOr<exec::ReferenceResult> empty = exec::reference_generate(*model_, r, greedy, false);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.status().message(), HasSubstr("empty"));
  for (int32_t bad : {-1, 97, 1000}) {
    r = request(3);
    r.prompt[2] = bad;
    absl::StatusOr<exec::ReferenceResult> res = exec::reference_generate(*model_, r, greedy, false);
    EXPECT_EQ(res.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(res.status().message(), HasSubstr(std::to_string(bad)));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ReferenceDecoderTest,
                         ::testing::Values(model::ModelType::kMixtral, model::ModelType::kQwen2Moe),
                         [](const ::testing::TestParamInfo<model::ModelType>& info) {
                           return std::string(model::model_type_name(info.param));
                         });

}  // namespace
}  // namespace muflow::engine
