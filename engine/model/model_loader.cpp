#include "engine/model/model_loader.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/hf_config.hpp"
#include "engine/model/safetensors.hpp"
#include "kernels/assert.hpp"

namespace muflow::engine::model {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Calls fn(name, shape, f32_only, tensor pointer or nullptr) for every slot, in file order.
// `W` is ModelWeights or const ModelWeights.
template <typename W, typename Fn>
void for_each_slot(W& w, Fn&& fn) {
  const ModelConfig& c = w.config;
  const int64_t H = c.hidden_size, V = c.vocab_size, E = c.num_experts, F = c.expert_ffn;
  const int64_t S = c.shared_expert_ffn;
  const int64_t q_out = c.num_heads * c.head_dim, kv_out = c.num_kv_heads * c.head_dim;
  const bool qwen = c.model_type == ModelType::kQwen2Moe;
  fn("model.embed_tokens.weight", std::vector<int64_t>{V, H}, true, &w.embed);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto* b = i < static_cast<int64_t>(w.blocks.size()) ? &w.blocks[i] : nullptr;
    auto at = [&](auto member) { return b == nullptr ? nullptr : &(b->*member); };
    const std::string p = absl::StrCat("model.layers.", i, ".");
    fn(p + "input_layernorm.weight", std::vector<int64_t>{H}, true, at(&BlockWeights::input_norm));
    fn(p + "self_attn.q_proj.weight", std::vector<int64_t>{q_out, H}, false, at(&BlockWeights::q));
    if (c.attention_bias)
      fn(p + "self_attn.q_proj.bias", std::vector<int64_t>{q_out}, true, at(&BlockWeights::q_bias));
    fn(p + "self_attn.k_proj.weight", std::vector<int64_t>{kv_out, H}, false, at(&BlockWeights::k));
    if (c.attention_bias)
      fn(p + "self_attn.k_proj.bias", std::vector<int64_t>{kv_out}, true, at(&BlockWeights::k_bias));
    fn(p + "self_attn.v_proj.weight", std::vector<int64_t>{kv_out, H}, false, at(&BlockWeights::v));
    if (c.attention_bias)
      fn(p + "self_attn.v_proj.bias", std::vector<int64_t>{kv_out}, true, at(&BlockWeights::v_bias));
    fn(p + "self_attn.o_proj.weight", std::vector<int64_t>{H, q_out}, false, at(&BlockWeights::o));
    fn(p + "post_attention_layernorm.weight", std::vector<int64_t>{H}, true,
       at(&BlockWeights::post_attn_norm));
    const std::string moe = p + (qwen ? "mlp." : "block_sparse_moe.");
    fn(moe + "gate.weight", std::vector<int64_t>{E, H}, true, at(&BlockWeights::router));
    for (int64_t e = 0; e < E; ++e) {
      auto* x = (b != nullptr && e < static_cast<int64_t>(b->experts.size())) ? &b->experts[e]
                                                                               : nullptr;
      auto ex = [&](auto member) { return x == nullptr ? nullptr : &(x->*member); };
      const std::string q = absl::StrCat(moe, "experts.", e, ".");
      fn(q + (qwen ? "gate_proj.weight" : "w1.weight"), std::vector<int64_t>{F, H}, false,
         ex(&ExpertWeights::gate));
      fn(q + (qwen ? "up_proj.weight" : "w3.weight"), std::vector<int64_t>{F, H}, false,
         ex(&ExpertWeights::up));
      fn(q + (qwen ? "down_proj.weight" : "w2.weight"), std::vector<int64_t>{H, F}, false,
         ex(&ExpertWeights::down));
    }
    if (S > 0) {
      auto* x = b == nullptr ? nullptr : &b->shared_expert;
      auto ex = [&](auto member) { return x == nullptr ? nullptr : &(x->*member); };
      fn(moe + "shared_expert.gate_proj.weight", std::vector<int64_t>{S, H}, false,
         ex(&ExpertWeights::gate));
      fn(moe + "shared_expert.up_proj.weight", std::vector<int64_t>{S, H}, false,
         ex(&ExpertWeights::up));
      fn(moe + "shared_expert.down_proj.weight", std::vector<int64_t>{H, S}, false,
         ex(&ExpertWeights::down));
      fn(moe + "shared_expert_gate.weight", std::vector<int64_t>{1, H}, true,
         at(&BlockWeights::shared_expert_gate));
    }
  }
  fn("model.norm.weight", std::vector<int64_t>{H}, true, &w.final_norm);
  if (!c.tie_word_embeddings) {
    fn("lm_head.weight", std::vector<int64_t>{V, H}, false, &w.lm_head);
  }
}

std::string shape_string(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

void convert_to_f32(WeightTensor* t) {
  if (t->dtype == DType::kF32) return;
  t->f32 = t->to_f32();
  t->bf16.clear();
  t->bf16.shrink_to_fit();
  t->dtype = DType::kF32;
}

// The safetensors files of one folder and which file holds each tensor.
struct TensorSource {
  std::vector<SafetensorsFile> files;
  std::map<std::string, size_t> file_of;  // tensor name -> index into files
  std::string listing;                     // the file that lists the names (for errors)
};

absl::StatusOr<json> read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::exception& ex) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON: ", ex.what()));
  }
}

absl::StatusOr<TensorSource> open_sharded(const fs::path& dir, const std::string& index_path) {
  absl::StatusOr<json> index = read_json(index_path);
  if (!index.ok()) return index.status();
  if (!index->is_object() || !index->contains("weight_map") ||
      !(*index)["weight_map"].is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        index_path, ": key 'weight_map' missing or not an object of tensor name -> shard file"));
  }
  TensorSource src;
  src.listing = index_path;
  std::map<std::string, size_t> shard_index;
  for (const auto& [name, shard] : (*index)["weight_map"].items()) {
    if (!shard.is_string() || shard.get<std::string>().empty() ||
        absl::StrContains(shard.get<std::string>(), "/") ||
        shard.get<std::string>().front() == '.') {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": weight_map key '", name, "' maps to ", shard.dump(),
                       "; expected the file name of a shard in the model folder"));
    }
    const std::string shard_name = shard.get<std::string>();
    auto it = shard_index.find(shard_name);
    if (it == shard_index.end()) {
      const std::string shard_path = (dir / shard_name).string();
      absl::StatusOr<SafetensorsFile> f = open_safetensors(shard_path);
      if (!f.ok()) {
        if (absl::IsNotFound(f.status())) {
          return absl::NotFoundError(absl::StrCat(index_path, ": shard '", shard_name,
                                                  "' (holding tensor '", name,
                                                  "') not found: ", f.status().message()));
        }
        return f.status();
      }
      it = shard_index.emplace(shard_name, src.files.size()).first;
      src.files.push_back(*std::move(f));
    }
    const SafetensorsFile& f = src.files[it->second];
    if (!f.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat(f.path(), ": tensor '", name,
                                                     "' not found (", index_path,
                                                     " lists it in this shard)"));
    }
    src.file_of[name] = it->second;
  }
  // Tensors a shard holds but the index does not list would be silently ignored: refuse.
  for (size_t i = 0; i < src.files.size(); ++i) {
    for (const auto& [name, entry] : src.files[i].entries()) {
      if (src.file_of.count(name) == 0) {
        return absl::InvalidArgumentError(absl::StrCat(src.files[i].path(), ": tensor '", name,
                                                       "' is not listed in ", index_path));
      }
    }
  }
  return src;
}

absl::StatusOr<TensorSource> open_source(const fs::path& dir) {
  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(single, ec)) {
    absl::StatusOr<SafetensorsFile> f = open_safetensors(single.string());
    if (!f.ok()) return f.status();
    TensorSource src;
    src.listing = single.string();
    for (const auto& [name, entry] : f->entries()) src.file_of[name] = 0;
    src.files.push_back(*std::move(f));
    return src;
  }
  if (fs::exists(index, ec)) return open_sharded(dir, index.string());
  return absl::NotFoundError(absl::StrCat(dir.string(),
                                          ": neither model.safetensors nor "
                                          "model.safetensors.index.json found"));
}

}  // namespace

std::vector<HfTensorSlot> hf_tensor_slots(ModelWeights* weights) {
  MUFLOW_ASSERT(weights->config.validate().ok(), "hf_tensor_slots needs a valid config");
  const ModelConfig& c = weights->config;
  weights->blocks.resize(c.num_layers);
  for (BlockWeights& b : weights->blocks) b.experts.resize(c.num_experts);
  std::vector<HfTensorSlot> slots;
  for_each_slot(*weights, [&](std::string name, std::vector<int64_t> shape, bool f32_only,
                              WeightTensor* t) {
    slots.push_back({std::move(name), std::move(shape), f32_only, t});
  });
  return slots;
}

std::vector<ConstHfTensorSlot> hf_tensor_slots(const ModelWeights& weights) {
  std::vector<ConstHfTensorSlot> slots;
  for_each_slot(weights, [&](std::string name, std::vector<int64_t> shape, bool f32_only,
                             const WeightTensor* t) {
    slots.push_back({std::move(name), std::move(shape), f32_only, t});
  });
  return slots;
}

absl::StatusOr<std::shared_ptr<const ModelWeights>> load_hf_model(const std::string& dir_name) {
  const fs::path dir(dir_name);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat(dir_name, ": not a model folder (no such directory)"));
  }
  auto weights = std::make_shared<ModelWeights>();
  absl::StatusOr<ModelConfig> config = parse_hf_config((dir / "config.json").string());
  if (!config.ok()) return config.status();
  weights->config = *config;

  absl::StatusOr<TensorSource> src = open_source(dir);
  if (!src.ok()) return src.status();

  std::set<std::string> expected;
  for (HfTensorSlot& slot : hf_tensor_slots(weights.get())) {
    expected.insert(slot.name);
    auto it = src->file_of.find(slot.name);
    if (it == src->file_of.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(src->listing, ": tensor '", slot.name, "' not found (required by a ",
                       model_type_name(config->model_type), " model with ",
                       config->num_layers, " layers and ", config->num_experts, " experts)"));
    }
    const SafetensorsFile& file = src->files[it->second];
    absl::StatusOr<WeightTensor> t = file.read_tensor(slot.name);
    if (!t.ok()) return t.status();
    if (t->shape != slot.shape) {
      return absl::InvalidArgumentError(absl::StrCat(file.path(), ": tensor '", slot.name,
                                                     "' has shape ", shape_string(t->shape),
                                                     ", expected ", shape_string(slot.shape)));
    }
    *slot.tensor = *std::move(t);
    if (slot.f32_only) convert_to_f32(slot.tensor);
  }
  for (const auto& [name, index] : src->file_of) {
    if (expected.count(name) != 0 || absl::EndsWith(name, ".rotary_emb.inv_freq")) continue;
    if (config->tie_word_embeddings && name == "lm_head.weight") continue;
    return absl::InvalidArgumentError(absl::StrCat(
        src->files[index].path(), ": unexpected tensor '", name, "' (not part of a ",
        model_type_name(config->model_type), " model with ", config->num_layers, " layers, ",
        config->num_experts, " experts",
        config->shared_expert_ffn > 0 ? ", a shared expert" : ", no shared expert",
        "); does config.json match the weights?"));
  }
  if (config->tie_word_embeddings) {
    weights->lm_head = weights->embed;
    weights->lm_head.name = "lm_head.weight";
  }
  return std::shared_ptr<const ModelWeights>(std::move(weights));
}

}  // namespace muflow::engine::model
