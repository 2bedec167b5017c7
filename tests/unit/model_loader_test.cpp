// Tests of HF model folders: config.json parsing, synthetic models, write → load round trips
// (mixtral and qwen2_moe, F32 and BF16, single file and sharded), the real kjv-mixtral-tiny
// models, and malformed folders whose error messages must name the file and tensor or key.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/model/hf_config.hpp"
#include "engine/model/model_loader.hpp"
#include "engine/model/model_writer.hpp"
#include "engine/model/safetensors.hpp"
#include "engine/model/synthetic_model.hpp"
#include "scratch_path.hpp"

namespace muflow::engine {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr uint64_t kSeed = 20240611;  // fixed; printed by the tests that use it

fs::path temp_dir(const std::string& name) {
  const fs::path dir = muflow::testing::scratch_path("model_loader_test") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

model::ModelConfig tiny_config(model::ModelType type) {
  model::ModelConfig c;
  c.model_type = type;
  c.vocab_size = 96;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.num_experts = 4;
  c.num_topk = 2;
  c.expert_ffn = 16;
  c.max_position_embeddings = 256;
  c.rope_theta = 1e6f;
  if (type == model::ModelType::kQwen2Moe) {
    c.shared_expert_ffn = 24;
    c.attention_bias = true;
    c.norm_topk_prob = false;
    c.tie_word_embeddings = true;
    c.rms_norm_eps = 1e-6f;
  }
  return c;
}

void expect_same_config(const model::ModelConfig& a, const model::ModelConfig& b) {
  EXPECT_EQ(a.model_type, b.model_type);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.num_experts, b.num_experts);
  EXPECT_EQ(a.num_topk, b.num_topk);
  EXPECT_EQ(a.expert_ffn, b.expert_ffn);
  EXPECT_EQ(a.shared_expert_ffn, b.shared_expert_ffn);
  EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_id, b.eos_token_id);
}

void expect_same_tensor(const model::WeightTensor& a, const model::WeightTensor& b,
                        const std::string& name) {
  SCOPED_TRACE(name);
  ASSERT_EQ(a.dtype, b.dtype);
  ASSERT_EQ(a.shape, b.shape);
  EXPECT_EQ(a.f32, b.f32);
  EXPECT_EQ(a.bf16, b.bf16);
}

// ---------------------------------------------------------------------------------------
// config.json

TEST(HfConfigTest, JsonRoundTripForBothModelTypes) {
  for (model::ModelType type : {model::ModelType::kMixtral, model::ModelType::kQwen2Moe}) {
    const model::ModelConfig c = tiny_config(type);
    const nlohmann::json j = model::hf_config_json(c);
    EXPECT_EQ(j["model_type"], model::model_type_name(type));
    EXPECT_TRUE(j["architectures"].is_array());
    absl::StatusOr<model::ModelConfig> back = model::parse_hf_config_json(j, "config.json");
    ASSERT_TRUE(back.ok()) << back.status();
    expect_same_config(c, *back);
  }
}

// #15: config.json sizes are bounded before the loader builds anything from them, and a value
// above 2^63 - 1 is named as given, never wrapped to a negative number.
TEST(HfConfigTest, HugeDimsAreRefusedWithTheirValue) {
  nlohmann::json j = model::hf_config_json(tiny_config(model::ModelType::kMixtral));
  j["num_local_experts"] = 1000000;
  absl::StatusOr<model::ModelConfig> c = model::parse_hf_config_json(j, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("num_local_experts must be at most 4096, got 1000000"));
  j = model::hf_config_json(tiny_config(model::ModelType::kMixtral));
  j["hidden_size"] = std::numeric_limits<uint64_t>::max();
  c = model::parse_hf_config_json(j, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("hidden_size"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("got 18446744073709551615"));
}

TEST(HfConfigTest, DefaultsFollowTransformers) {
  const nlohmann::json mixtral = {{"model_type", "mixtral"},     {"vocab_size", 100},
                                  {"hidden_size", 64},           {"num_hidden_layers", 2},
                                  {"num_attention_heads", 8},    {"num_local_experts", 4},
                                  {"intermediate_size", 32},     {"num_experts_per_tok", 2},
                                  {"bos_token_id", nullptr},     {"eos_token_id", nullptr}};
  absl::StatusOr<model::ModelConfig> c = model::parse_hf_config_json(mixtral, "m/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->rope_theta, 1e6f);
  EXPECT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->bos_token_id, 1);
  EXPECT_EQ(c->eos_token_id, 2);

  nlohmann::json qwen = mixtral;
  qwen["model_type"] = "qwen2_moe";
  qwen.erase("num_local_experts");
  qwen["num_experts"] = 6;
  qwen["moe_intermediate_size"] = 16;
  qwen["shared_expert_intermediate_size"] = 48;
  qwen["eos_token_id"] = {5, 7};
  c = model::parse_hf_config_json(qwen, "q/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model_type, model::ModelType::kQwen2Moe);
  EXPECT_EQ(c->num_experts, 6);
  EXPECT_EQ(c->expert_ffn, 16);
  EXPECT_EQ(c->shared_expert_ffn, 48);
  EXPECT_FALSE(c->norm_topk_prob);
  EXPECT_TRUE(c->attention_bias);
  EXPECT_EQ(c->rope_theta, 10000.0f);
  EXPECT_EQ(c->rms_norm_eps, 1e-6f);
  EXPECT_EQ(c->eos_token_id, 5);
}

struct BadConfigCase {
  const char* label;
  std::string text;
  std::string expect;
};

class HfConfigBadTest : public ::testing::TestWithParam<BadConfigCase> {};

std::string valid_config_with(const std::string& key, const nlohmann::json& value) {
  nlohmann::json j = model::hf_config_json(tiny_config(model::ModelType::kQwen2Moe));
  if (value.is_discarded()) {
    j.erase(key);
  } else {
    j[key] = value;
  }
  return j.dump();
}

TEST_P(HfConfigBadTest, ErrorNamesFileAndKey) {
  const BadConfigCase& c = GetParam();
  const fs::path path = temp_dir(std::string("config_") + c.label) / "config.json";
  write_text(path, c.text);
  absl::StatusOr<model::ModelConfig> config = model::parse_hf_config(path.string());
  ASSERT_FALSE(config.ok());
  const std::string msg(config.status().message());
  EXPECT_THAT(msg, HasSubstr(path.string()));
  EXPECT_THAT(msg, HasSubstr(c.expect));
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, HfConfigBadTest,
    ::testing::Values(
        BadConfigCase{"notjson", "{\"model_type\": \"mixtral\",", "not valid JSON"},
        BadConfigCase{"notobject", "[1]", "expected a JSON object, got array"},
        BadConfigCase{"missing", valid_config_with("hidden_size", nlohmann::json::value_t::discarded),
                      "key 'hidden_size' is missing (expected an integer)"},
        BadConfigCase{"mistyped", valid_config_with("hidden_size", "32"),
                      "key 'hidden_size' must be an integer, got string"},
        BadConfigCase{"floatdim", valid_config_with("num_experts", 4.5),
                      "key 'num_experts' must be an integer, got number"},
        BadConfigCase{"boolkey", valid_config_with("norm_topk_prob", 1),
                      "key 'norm_topk_prob' must be a boolean"},
        BadConfigCase{"unknowntype", valid_config_with("model_type", "llama"),
                      "key 'model_type' is 'llama', expected \"mixtral\" or \"qwen2_moe\""},
        BadConfigCase{"sparsestep", valid_config_with("decoder_sparse_step", 2),
                      "key 'decoder_sparse_step' is 2: dense MLP layers are not supported"},
        BadConfigCase{"mlponly", valid_config_with("mlp_only_layers", nlohmann::json::array({0})),
                      "key 'mlp_only_layers' is [0]: dense MLP layers are not supported"},
        BadConfigCase{"ropescaling",
                      valid_config_with("rope_scaling", {{"type", "linear"}, {"factor", 2}}),
                      "key 'rope_scaling'"},
        BadConfigCase{"act", valid_config_with("hidden_act", "gelu"), "key 'hidden_act'"},
        BadConfigCase{"gqa", valid_config_with("num_key_value_heads", 3),
                      "num_key_value_heads (3) must divide num_attention_heads (4)"},
        BadConfigCase{"topk", valid_config_with("num_experts_per_tok", 9),
                      "num_experts_per_tok (9) must not exceed"}),
    [](const ::testing::TestParamInfo<BadConfigCase>& info) { return info.param.label; });

// ---------------------------------------------------------------------------------------
// synthetic models

TEST(SyntheticModelTest, DeterministicPerSeedAndWellFormed) {
  std::printf("seed %llu\n", static_cast<unsigned long long>(kSeed));
  const model::ModelConfig c = tiny_config(model::ModelType::kMixtral);
  const model::ModelWeights a = model::make_synthetic_model(c, kSeed, model::DType::kF32);
  const model::ModelWeights b = model::make_synthetic_model(c, kSeed, model::DType::kF32);
  const model::ModelWeights other = model::make_synthetic_model(c, kSeed + 1, model::DType::kF32);
  EXPECT_EQ(a.blocks.at(1).experts.at(3).down.f32, b.blocks.at(1).experts.at(3).down.f32);
  EXPECT_NE(a.blocks.at(1).experts.at(3).down.f32, other.blocks.at(1).experts.at(3).down.f32);
  // Distinct tensors draw distinct streams.
  EXPECT_NE(a.blocks[0].q.f32, a.blocks[1].q.f32);
  for (const model::ConstHfTensorSlot& slot : model::hf_tensor_slots(a)) {
    ASSERT_NE(slot.tensor, nullptr);
    EXPECT_EQ(slot.tensor->name, slot.name);
    EXPECT_EQ(slot.tensor->shape, slot.shape) << slot.name;
    EXPECT_EQ(static_cast<int64_t>(slot.tensor->f32.size()), slot.tensor->numel()) << slot.name;
  }
  // Norms near 1, linear weights with std near 0.02.
  for (float v : a.blocks[0].input_norm.f32) EXPECT_NEAR(v, 1.0f, 0.02f);
  double sum_sq = 0;
  for (float v : a.blocks[0].experts[0].gate.f32) sum_sq += double(v) * v;
  EXPECT_NEAR(std::sqrt(sum_sq / a.blocks[0].experts[0].gate.f32.size()), 0.02, 0.004);
}

TEST(SyntheticModelTest, RoutingAndLogitsAreNotDegenerate) {
  const model::ModelConfig c = tiny_config(model::ModelType::kMixtral);
  const model::ModelWeights w = model::make_synthetic_model(c, kSeed, model::DType::kF32);
  const int64_t H = c.hidden_size;
  std::set<int64_t> top1;
  for (int64_t token = 0; token < c.vocab_size; ++token) {
    // RMS-normalised embedding row, as the first router sees it (norm weight ≈ 1).
    std::vector<float> x(w.embed.f32.begin() + token * H, w.embed.f32.begin() + (token + 1) * H);
    double ms = 0;
    for (float v : x) ms += double(v) * v;
    const double scale = 1.0 / std::sqrt(ms / H + c.rms_norm_eps);
    std::vector<double> router(c.num_experts), logits(c.vocab_size);
    for (int64_t e = 0; e < c.num_experts; ++e) {
      for (int64_t h = 0; h < H; ++h) router[e] += w.blocks[0].router.f32[e * H + h] * x[h] * scale;
    }
    top1.insert(std::max_element(router.begin(), router.end()) - router.begin());
    for (int64_t v = 0; v < c.vocab_size; ++v) {
      for (int64_t h = 0; h < H; ++h) logits[v] += w.lm_head.f32[v * H + h] * x[h] * scale;
    }
    const auto [lo, hi] = std::minmax_element(logits.begin(), logits.end());
    EXPECT_GT(*hi - *lo, 0.1) << "token " << token;
  }
  EXPECT_EQ(static_cast<int64_t>(top1.size()), c.num_experts) << "every expert is some top-1";
}

TEST(SyntheticModelTest, Bf16MatricesAreRoundedF32Draws) {
  const model::ModelConfig c = tiny_config(model::ModelType::kQwen2Moe);
  const model::ModelWeights f = model::make_synthetic_model(c, kSeed, model::DType::kF32);
  const model::ModelWeights b = model::make_synthetic_model(c, kSeed, model::DType::kBF16);
  ASSERT_EQ(b.blocks[1].shared_expert.up.dtype, model::DType::kBF16);
  for (size_t i = 0; i < f.blocks[1].shared_expert.up.f32.size(); ++i) {
    ASSERT_EQ(b.blocks[1].shared_expert.up.bf16[i],
              model::f32_to_bf16(f.blocks[1].shared_expert.up.f32[i]));
  }
  EXPECT_EQ(b.blocks[1].router.dtype, model::DType::kF32);
  EXPECT_EQ(b.blocks[1].q_bias.dtype, model::DType::kF32);
  EXPECT_EQ(b.blocks[1].q_bias.f32, f.blocks[1].q_bias.f32);
  EXPECT_EQ(b.lm_head.f32, b.embed.f32);  // tied
}

// ---------------------------------------------------------------------------------------
// write → load round trips

struct RoundTripCase {
  model::ModelType type;
  model::DType dtype;
  int64_t max_shard_bytes;
};

class ModelRoundTripTest : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(ModelRoundTripTest, EveryTensorComesBackExactly) {
  const RoundTripCase& rc = GetParam();
  std::printf("seed %llu\n", static_cast<unsigned long long>(kSeed));
  const model::ModelConfig c = tiny_config(rc.type);
  const model::ModelWeights w = model::make_synthetic_model(c, kSeed, rc.dtype);
  const fs::path dir =
      temp_dir(absl::StrCat(model::model_type_name(rc.type), "_", model::dtype_name(rc.dtype), "_",
                            rc.max_shard_bytes)) /
      "nested" / "model";
  ASSERT_TRUE(model::write_hf_model(w, dir.string(), rc.max_shard_bytes).ok());

  if (rc.max_shard_bytes == 0) {
    EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
    EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  } else {
    EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
    ASSERT_TRUE(fs::exists(dir / "model.safetensors.index.json"));
    int num_shards = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().filename().string().rfind("model-", 0) == 0) {
        ++num_shards;
        EXPECT_LE(static_cast<int64_t>(fs::file_size(entry.path())),
                  rc.max_shard_bytes + 8192)  // data ≤ limit (no tensor here is larger) + header
            << entry.path();
      }
    }
    EXPECT_GT(num_shards, 2);
  }
  absl::StatusOr<model::ModelConfig> written_config =
      model::parse_hf_config((dir / "config.json").string());
  ASSERT_TRUE(written_config.ok()) << written_config.status();

  absl::StatusOr<std::shared_ptr<const model::ModelWeights>> loaded =
      model::load_hf_model(dir.string());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  expect_same_config(c, (*loaded)->config);
  const std::vector<model::ConstHfTensorSlot> want = model::hf_tensor_slots(w);
  const std::vector<model::ConstHfTensorSlot> got = model::hf_tensor_slots(**loaded);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].name, got[i].name);
    ASSERT_NE(got[i].tensor, nullptr) << got[i].name;
    expect_same_tensor(*want[i].tensor, *got[i].tensor, want[i].name);
  }
  expect_same_tensor(w.lm_head, (*loaded)->lm_head, "lm_head");
  if (c.shared_expert_ffn == 0) {
    EXPECT_TRUE((*loaded)->blocks[0].shared_expert.gate.empty());
    EXPECT_TRUE((*loaded)->blocks[0].q_bias.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllLayouts, ModelRoundTripTest,
    ::testing::Values(RoundTripCase{model::ModelType::kMixtral, model::DType::kF32, 0},
                      RoundTripCase{model::ModelType::kMixtral, model::DType::kBF16, 0},
                      RoundTripCase{model::ModelType::kMixtral, model::DType::kF32, 6000},
                      RoundTripCase{model::ModelType::kMixtral, model::DType::kBF16, 6000},
                      RoundTripCase{model::ModelType::kQwen2Moe, model::DType::kF32, 0},
                      RoundTripCase{model::ModelType::kQwen2Moe, model::DType::kBF16, 0},
                      RoundTripCase{model::ModelType::kQwen2Moe, model::DType::kF32, 6000},
                      RoundTripCase{model::ModelType::kQwen2Moe, model::DType::kBF16, 6000}));

TEST(ModelWriterTest, RewritingSwitchesLayoutCleanly) {
  const model::ModelWeights w = model::make_synthetic_model(tiny_config(model::ModelType::kMixtral),
                                                            kSeed, model::DType::kF32);
  const fs::path dir = temp_dir("switch");
  ASSERT_TRUE(model::write_hf_model(w, dir.string(), 6000).ok());
  ASSERT_TRUE(model::write_hf_model(w, dir.string(), 0).ok());
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  ASSERT_TRUE(model::write_hf_model(w, dir.string(), 6000).ok());
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
  EXPECT_TRUE(model::load_hf_model(dir.string()).ok());
}

TEST(ModelWriterTest, RejectsMissingOrMisshapenTensor) {
  model::ModelWeights w = model::make_synthetic_model(tiny_config(model::ModelType::kMixtral),
                                                      kSeed, model::DType::kF32);
  w.blocks[1].experts[2].up = model::WeightTensor{};
  absl::Status s = model::write_hf_model(w, temp_dir("writer_missing").string(), 0);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("tensor 'model.layers.1.block_sparse_moe.experts.2.w3.weight' is missing"));
  w = model::make_synthetic_model(tiny_config(model::ModelType::kMixtral), kSeed,
                                  model::DType::kF32);
  w.final_norm.shape = {16, 2};
  s = model::write_hf_model(w, temp_dir("writer_shape").string(), 0);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("tensor 'model.norm.weight' has shape [16,2], expected [32]"));
  EXPECT_FALSE(model::write_hf_model(w, temp_dir("writer_neg").string(), -1).ok());
}

// ---------------------------------------------------------------------------------------
// malformed folders

// A written synthetic mixtral folder whose model.safetensors is then rewritten by `edit`.
fs::path folder_with_edited_tensors(
    const std::string& name, const std::function<void(std::vector<model::WeightTensor>*)>& edit) {
  const model::ModelWeights w = model::make_synthetic_model(tiny_config(model::ModelType::kMixtral),
                                                            kSeed, model::DType::kF32);
  const fs::path dir = temp_dir(name);
  EXPECT_TRUE(model::write_hf_model(w, dir.string(), 0).ok());
  std::vector<model::WeightTensor> tensors;
  for (const model::ConstHfTensorSlot& slot : model::hf_tensor_slots(w))
    tensors.push_back(*slot.tensor);
  edit(&tensors);
  std::vector<const model::WeightTensor*> ptrs;
  for (const model::WeightTensor& t : tensors) ptrs.push_back(&t);
  EXPECT_TRUE(model::write_safetensors((dir / "model.safetensors").string(), ptrs).ok());
  return dir;
}

std::string load_error(const fs::path& dir) {
  absl::StatusOr<std::shared_ptr<const model::ModelWeights>> m = model::load_hf_model(dir.string());
  EXPECT_FALSE(m.ok());
  return std::string(m.status().message());
}

TEST(ModelLoaderErrorsTest, MissingTensor) {
  const std::string gone = "model.layers.1.self_attn.k_proj.weight";
  const fs::path dir = folder_with_edited_tensors("missing_tensor", [&](auto* ts) {
    std::erase_if(*ts, [&](const model::WeightTensor& t) { return t.name == gone; });
  });
  EXPECT_THAT(load_error(dir), HasSubstr((dir / "model.safetensors").string() + ": tensor '" +
                                         gone + "' not found"));
}

TEST(ModelLoaderErrorsTest, ShapeMismatch) {
  const fs::path dir = folder_with_edited_tensors("shape", [](auto* ts) {
    for (model::WeightTensor& t : *ts) {
      if (t.name == "model.layers.0.self_attn.q_proj.weight") t.shape = {32, 16, 2};
    }
  });
  EXPECT_THAT(load_error(dir),
              HasSubstr("model.safetensors: tensor 'model.layers.0.self_attn.q_proj.weight' has "
                        "shape [32,16,2], expected [32,32]"));
}

TEST(ModelLoaderErrorsTest, UnsupportedDtypeInModel) {
  const fs::path dir = temp_dir("f16_model");
  const model::ModelWeights w = model::make_synthetic_model(tiny_config(model::ModelType::kMixtral),
                                                            kSeed, model::DType::kF32);
  ASSERT_TRUE(model::write_hf_model(w, dir.string(), 0).ok());
  // Relabel model.norm.weight (32 F32 = 128 bytes) as 64 F16 in place: a valid file whose
  // norm has a dtype the engine does not read.
  const fs::path file = dir / "model.safetensors";
  std::ifstream in(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  in.close();
  const size_t at = bytes.find("\"model.norm.weight\":{");
  ASSERT_NE(at, std::string::npos);
  const std::string from = "\"dtype\":\"F32\",\"shape\":[32]}";
  const size_t entry = bytes.find(from, at);
  ASSERT_NE(entry, std::string::npos);
  bytes.replace(entry, from.size(), "\"dtype\":\"F16\",\"shape\":[64]}");
  write_text(file, bytes);
  EXPECT_THAT(load_error(dir),
              HasSubstr("model.safetensors: tensor 'model.norm.weight' has dtype F16; dtype F16 "
                        "not supported; expected F32 or BF16"));
}

TEST(ModelLoaderErrorsTest, UnexpectedTensorMeansConfigMismatch) {
  const fs::path dir = folder_with_edited_tensors("extra", [](auto* ts) {
    model::WeightTensor extra = ts->front();
    extra.name = "model.layers.2.input_layernorm.weight";
    ts->push_back(extra);
  });
  EXPECT_THAT(load_error(dir), HasSubstr("unexpected tensor 'model.layers.2.input_layernorm.weight'"));
}

TEST(ModelLoaderErrorsTest, TruncatedWeightsFile) {
  const model::ModelWeights w = model::make_synthetic_model(tiny_config(model::ModelType::kMixtral),
                                                            kSeed, model::DType::kBF16);
  const fs::path dir = temp_dir("truncated");
  ASSERT_TRUE(model::write_hf_model(w, dir.string(), 0).ok());
  const fs::path file = dir / "model.safetensors";
  fs::resize_file(file, fs::file_size(file) - 100);
  const std::string msg = load_error(dir);
  EXPECT_THAT(msg, HasSubstr(file.string()));
  EXPECT_THAT(msg, HasSubstr("(file truncated?)"));
}

TEST(ModelLoaderErrorsTest, ShardedIndexPointsToMissingShard) {
  const model::ModelWeights w = model::make_synthetic_model(
      tiny_config(model::ModelType::kQwen2Moe), kSeed, model::DType::kF32);
  const fs::path dir = temp_dir("missing_shard");
  ASSERT_TRUE(model::write_hf_model(w, dir.string(), 6000).ok());
  std::ifstream in(dir / "model.safetensors.index.json");
  const nlohmann::json index = nlohmann::json::parse(in);
  const std::string shard = index["weight_map"]["model.layers.1.input_layernorm.weight"];
  ASSERT_TRUE(fs::remove(dir / shard));
  absl::StatusOr<std::shared_ptr<const model::ModelWeights>> m = model::load_hf_model(dir.string());
  ASSERT_TRUE(absl::IsNotFound(m.status())) << m.status();
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("model.safetensors.index.json: shard '" + shard + "'"));
}

TEST(ModelLoaderErrorsTest, ShardedIndexMalformed) {
  const model::ModelWeights w = model::make_synthetic_model(tiny_config(model::ModelType::kMixtral),
                                                            kSeed, model::DType::kF32);
  const fs::path dir = temp_dir("bad_index");
  ASSERT_TRUE(model::write_hf_model(w, dir.string(), 6000).ok());
  write_text(dir / "model.safetensors.index.json", R"({"metadata": {}})");
  EXPECT_THAT(load_error(dir), HasSubstr("model.safetensors.index.json: key 'weight_map' missing"));
  write_text(dir / "model.safetensors.index.json",
             R"({"weight_map": {"model.norm.weight": "../elsewhere.safetensors"}})");
  EXPECT_THAT(load_error(dir), HasSubstr("weight_map key 'model.norm.weight' maps to"));
}

TEST(ModelLoaderErrorsTest, MissingFilesAreNotFound) {
  const fs::path dir = temp_dir("empty");
  absl::StatusOr<std::shared_ptr<const model::ModelWeights>> m = model::load_hf_model(dir.string());
  EXPECT_TRUE(absl::IsNotFound(m.status()));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("config.json"));
  write_text(dir / "config.json",
             model::hf_config_json(tiny_config(model::ModelType::kMixtral)).dump());
  m = model::load_hf_model(dir.string());
  EXPECT_TRUE(absl::IsNotFound(m.status()));
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("neither model.safetensors nor model.safetensors.index.json"));
  EXPECT_TRUE(absl::IsNotFound(model::load_hf_model((dir / "nope").string()).status()));
}

// ---------------------------------------------------------------------------------------
// the real kjv-mixtral-tiny models

fs::path real_model_dir(const std::string& name) {
  return fs::path(MUFLOW_DATA_DIR) / "models" / name;
}

TEST(RealModelTest, KjvMixtralTinyF32AndBf16) {
  const fs::path f32_dir = real_model_dir("kjv-mixtral-tiny");
  const fs::path bf16_dir = real_model_dir("kjv-mixtral-tiny-bf16");
  if (!fs::exists(f32_dir / "model.safetensors") || !fs::exists(bf16_dir / "model.safetensors")) {
    GTEST_SKIP() << "real models not found under " << MUFLOW_DATA_DIR
                 << "/models (kjv-mixtral-tiny, kjv-mixtral-tiny-bf16); see shared/data/README.md";
  }
  absl::StatusOr<std::shared_ptr<const model::ModelWeights>> f =
      model::load_hf_model(f32_dir.string());
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<std::shared_ptr<const model::ModelWeights>> b =
      model::load_hf_model(bf16_dir.string());
  ASSERT_TRUE(b.ok()) << b.status();
  const model::ModelConfig& c = (*f)->config;
  EXPECT_EQ(c.model_type, model::ModelType::kMixtral);
  EXPECT_EQ(c.vocab_size, 4096);
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.num_layers, 4);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_topk, 2);
  EXPECT_EQ(c.expert_ffn, 256);
  EXPECT_EQ(c.shared_expert_ffn, 0);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_EQ(c.rope_theta, 1e6f);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  expect_same_config(c, (*b)->config);

  // 4,396,160 parameters per the model's README.
  int64_t num_params = 0;
  for (const model::ConstHfTensorSlot& slot : model::hf_tensor_slots(**f))
    num_params += slot.tensor->numel();
  EXPECT_EQ(num_params, 4396160);

  EXPECT_EQ((*f)->blocks[2].experts[5].up.dtype, model::DType::kF32);
  EXPECT_EQ((*b)->blocks[2].experts[5].up.dtype, model::DType::kBF16);
  EXPECT_EQ((*b)->lm_head.dtype, model::DType::kBF16);
  EXPECT_EQ((*b)->final_norm.dtype, model::DType::kF32);  // vectors always f32
  EXPECT_EQ((*b)->embed.dtype, model::DType::kF32);
  EXPECT_EQ((*b)->blocks[0].router.dtype, model::DType::kF32);

  // The bf16 folder holds the f32 weights rounded to nearest-even bf16.
  const std::vector<model::ConstHfTensorSlot> fs32 = model::hf_tensor_slots(**f);
  const std::vector<model::ConstHfTensorSlot> fs16 = model::hf_tensor_slots(**b);
  ASSERT_EQ(fs32.size(), fs16.size());
  for (size_t i = 0; i < fs32.size(); ++i) {
    SCOPED_TRACE(fs32[i].name);
    const std::vector<float>& ref = fs32[i].tensor->f32;
    const std::vector<float> low = fs16[i].tensor->to_f32();
    ASSERT_EQ(ref.size(), low.size());
    for (size_t k = 0; k < ref.size(); ++k) {
      ASSERT_EQ(model::f32_to_bf16(ref[k]), model::f32_to_bf16(low[k])) << "element " << k;
      ASSERT_EQ(model::bf16_to_f32(model::f32_to_bf16(ref[k])), low[k]) << "element " << k;
    }
  }
  // Trained weights, not an init: norms moved away from 1.
  EXPECT_NE((*f)->final_norm.f32[0], 1.0f);
}

}  // namespace
}  // namespace muflow::engine
