#include "engine/model/hf_config.hpp"

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace muflow::engine::model {

namespace {

using nlohmann::json;

// Typed access to one config object; every error names the source and the key.
class KeyReader {
 public:
  KeyReader(const json& j, const std::string& source) : j_(j), source_(source) {}

  absl::Status error(const std::string& key, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": key '", key, "' ", what));
  }

  // Present and not null.
  const json* find(const std::string& key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }

  absl::Status read_int(const std::string& key, int64_t* out, bool required) const {
    const json* v = find(key);
    if (v == nullptr) {
      return required ? error(key, "is missing (expected an integer)") : absl::OkStatus();
    }
    if (!v->is_number_integer()) {
      return error(key, absl::StrCat("must be an integer, got ", v->type_name(), " ", v->dump()));
    }
    // JSON integers above 2^63 - 1 parse as unsigned: never wrap them to negative values.
    if (v->is_number_unsigned() &&
        v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return error(key, absl::StrCat("must be at most ", std::numeric_limits<int64_t>::max(),
                                     ", got ", v->dump()));
    }
    *out = v->get<int64_t>();
    return absl::OkStatus();
  }

  absl::Status read_float(const std::string& key, float* out) const {
    const json* v = find(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_number()) {
      return error(key, absl::StrCat("must be a number, got ", v->type_name(), " ", v->dump()));
    }
    *out = v->get<float>();
    return absl::OkStatus();
  }

  absl::Status read_bool(const std::string& key, bool* out) const {
    const json* v = find(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_boolean()) {
      return error(key, absl::StrCat("must be a boolean, got ", v->type_name(), " ", v->dump()));
    }
    *out = v->get<bool>();
    return absl::OkStatus();
  }

  // An integer, or a non-empty list of integers (the first is used), or absent/null.
  absl::Status read_token_id(const std::string& key, int64_t* out) const {
    const json* v = find(key);
    if (v == nullptr) return absl::OkStatus();
    if (v->is_array() && !v->empty() && (*v)[0].is_number_integer()) {
      *out = (*v)[0].get<int64_t>();
      return absl::OkStatus();
    }
    return read_int(key, out, false);
  }

 private:
  const json& j_;
  const std::string& source_;
};

// The shortest decimal that round-trips the float, as a double: 1e-05f is written "1e-05",
// not 9.999999747378752e-06.
double shortest_decimal(float value) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf - 1, value);
  if (ec != std::errc()) return value;
  *end = '\0';
  return std::strtod(buf, nullptr);
}

#define MUFLOW_RETURN_IF_ERROR(expr)            \
  do {                                          \
    if (absl::Status s_ = (expr); !s_.ok()) return s_; \
  } while (0)

}  // namespace

absl::StatusOr<ModelConfig> parse_hf_config_json(const json& j, const std::string& source) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected a JSON object, got ", j.type_name()));
  }
  KeyReader r(j, source);
  const json* type = r.find("model_type");
  if (type == nullptr) return r.error("model_type", "is missing (expected a string)");
  if (!type->is_string()) {
    return r.error("model_type", absl::StrCat("must be a string, got ", type->type_name()));
  }
  ModelConfig c;
  const std::string type_name = type->get<std::string>();
  const bool qwen = type_name == "qwen2_moe";
  if (type_name == "mixtral") {
    c.model_type = ModelType::kMixtral;
    c.rms_norm_eps = 1e-5f;
    c.rope_theta = 1e6f;
    c.max_position_embeddings = 4096 * 32;
  } else if (qwen) {
    c.model_type = ModelType::kQwen2Moe;
    c.rms_norm_eps = 1e-6f;
    c.rope_theta = 10000.0f;
    c.max_position_embeddings = 32768;
    c.attention_bias = true;
    c.norm_topk_prob = false;
  } else {
    return r.error("model_type", absl::StrCat("is '", type_name,
                                              "', expected \"mixtral\" or \"qwen2_moe\""));
  }
  MUFLOW_RETURN_IF_ERROR(r.read_int("vocab_size", &c.vocab_size, true));
  MUFLOW_RETURN_IF_ERROR(r.read_int("hidden_size", &c.hidden_size, true));
  MUFLOW_RETURN_IF_ERROR(r.read_int("num_hidden_layers", &c.num_layers, true));
  MUFLOW_RETURN_IF_ERROR(r.read_int("num_attention_heads", &c.num_heads, true));
  MUFLOW_RETURN_IF_ERROR(r.read_int("num_experts_per_tok", &c.num_topk, true));
  c.num_kv_heads = c.num_heads;
  MUFLOW_RETURN_IF_ERROR(r.read_int("num_key_value_heads", &c.num_kv_heads, false));
  if (c.num_heads > 0) c.head_dim = c.hidden_size / c.num_heads;
  MUFLOW_RETURN_IF_ERROR(r.read_int("head_dim", &c.head_dim, false));
  if (qwen) {
    MUFLOW_RETURN_IF_ERROR(r.read_int("num_experts", &c.num_experts, true));
    MUFLOW_RETURN_IF_ERROR(r.read_int("moe_intermediate_size", &c.expert_ffn, true));
    MUFLOW_RETURN_IF_ERROR(
        r.read_int("shared_expert_intermediate_size", &c.shared_expert_ffn, true));
    MUFLOW_RETURN_IF_ERROR(r.read_bool("norm_topk_prob", &c.norm_topk_prob));
    int64_t sparse_step = 1;
    MUFLOW_RETURN_IF_ERROR(r.read_int("decoder_sparse_step", &sparse_step, false));
    if (sparse_step != 1) {
      return r.error("decoder_sparse_step",
                     absl::StrCat("is ", sparse_step,
                                  ": dense MLP layers are not supported (expected 1)"));
    }
    if (const json* dense = r.find("mlp_only_layers")) {
      if (!dense->is_array()) {
        return r.error("mlp_only_layers",
                       absl::StrCat("must be a list, got ", dense->type_name()));
      }
      if (!dense->empty()) {
        return r.error("mlp_only_layers", absl::StrCat("is ", dense->dump(),
                                                       ": dense MLP layers are not supported "
                                                       "(expected an empty list)"));
      }
    }
  } else {
    MUFLOW_RETURN_IF_ERROR(r.read_int("num_local_experts", &c.num_experts, true));
    MUFLOW_RETURN_IF_ERROR(r.read_int("intermediate_size", &c.expert_ffn, true));
  }
  MUFLOW_RETURN_IF_ERROR(r.read_bool("tie_word_embeddings", &c.tie_word_embeddings));
  MUFLOW_RETURN_IF_ERROR(r.read_float("rms_norm_eps", &c.rms_norm_eps));
  MUFLOW_RETURN_IF_ERROR(r.read_float("rope_theta", &c.rope_theta));
  MUFLOW_RETURN_IF_ERROR(
      r.read_int("max_position_embeddings", &c.max_position_embeddings, false));
  MUFLOW_RETURN_IF_ERROR(r.read_token_id("bos_token_id", &c.bos_token_id));
  MUFLOW_RETURN_IF_ERROR(r.read_token_id("eos_token_id", &c.eos_token_id));
  if (const json* act = r.find("hidden_act")) {
    if (!act->is_string() || act->get<std::string>() != "silu") {
      return r.error("hidden_act", absl::StrCat("is ", act->dump(), ", expected \"silu\""));
    }
  }
  if (const json* scaling = r.find("rope_scaling")) {
    return r.error("rope_scaling",
                   absl::StrCat("is ", scaling->dump(), ": RoPE scaling is not supported "
                                                        "(expected null)"));
  }
  if (absl::Status s = c.validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", s.message()));
  }
  return c;
}

absl::StatusOr<ModelConfig> parse_hf_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open config file"));
  std::stringstream text;
  text << in.rdbuf();
  json j;
  try {
    j = json::parse(text.str());
  } catch (const json::exception& ex) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON: ", ex.what()));
  }
  return parse_hf_config_json(j, path);
}

json hf_config_json(const ModelConfig& c, const std::string& torch_dtype) {
  const bool qwen = c.model_type == ModelType::kQwen2Moe;
  json j = json::object();
  j["architectures"] = json::array({qwen ? "Qwen2MoeForCausalLM" : "MixtralForCausalLM"});
  j["model_type"] = model_type_name(c.model_type);
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["initializer_range"] = 0.02;
  j["rms_norm_eps"] = shortest_decimal(c.rms_norm_eps);
  j["rope_theta"] = shortest_decimal(c.rope_theta);
  j["rope_scaling"] = nullptr;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  j["num_experts_per_tok"] = c.num_topk;
  j["use_cache"] = true;
  j["torch_dtype"] = torch_dtype;
  if (qwen) {
    j["num_experts"] = c.num_experts;
    j["moe_intermediate_size"] = c.expert_ffn;
    j["intermediate_size"] = c.expert_ffn;  // HF uses it only for dense layers (none here)
    j["shared_expert_intermediate_size"] = c.shared_expert_ffn;
    j["norm_topk_prob"] = c.norm_topk_prob;
    j["decoder_sparse_step"] = 1;
    j["mlp_only_layers"] = json::array();
    j["use_sliding_window"] = false;
  } else {
    j["num_local_experts"] = c.num_experts;
    j["intermediate_size"] = c.expert_ffn;
    j["sliding_window"] = nullptr;
  }
  return j;
}

}  // namespace muflow::engine::model
