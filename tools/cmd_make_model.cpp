// `muflow make-model`: writes a synthetic HF model folder (config.json + safetensors).
#include <cstdio>
#include <memory>
#include <string>

#include "engine/model/model_memory.hpp"
#include "engine/model/model_writer.hpp"
#include "engine/model/synthetic_model.hpp"
#include "tools/commands.hpp"

namespace muflow::tools {

Command add_make_model_command(CLI::App& app) {
  struct Options {
    std::string out, type = "mixtral", dtype = "f32";
    int64_t vocab = 512, hidden = 128, layers = 4, heads = 4, kv_heads = 2, head_dim = 0,
            experts = 8, topk = 2, ffn = 256, shared_ffn = 0, shard_bytes = 0, max_pos = 4096;
    int norm_topk_prob = -1;  // -1: the model type's default
    uint64_t seed = 0;
  };
  auto o = std::make_shared<Options>();
  app.add_option("--out", o->out, "output folder (created)")->required();
  app.add_option("--type", o->type, "model_type")->check(CLI::IsMember({"mixtral", "qwen2_moe"}));
  app.add_option("--vocab", o->vocab, "vocabulary size")->check(CLI::PositiveNumber);
  app.add_option("--hidden", o->hidden, "hidden size")->check(CLI::PositiveNumber);
  app.add_option("--layers", o->layers, "number of MoE blocks")->check(CLI::PositiveNumber);
  app.add_option("--heads", o->heads, "attention heads")->check(CLI::PositiveNumber);
  app.add_option("--kv-heads", o->kv_heads, "key/value heads (GQA)")->check(CLI::PositiveNumber);
  app.add_option("--head-dim", o->head_dim, "head dim (default hidden/heads)");
  app.add_option("--experts", o->experts, "routed experts per block")->check(CLI::PositiveNumber);
  app.add_option("--topk", o->topk, "experts per token")->check(CLI::PositiveNumber);
  app.add_option("--ffn", o->ffn, "expert FFN size")->check(CLI::PositiveNumber);
  app.add_option("--shared-ffn", o->shared_ffn, "shared expert FFN size (qwen2_moe; 0 = none)");
  app.add_option("--norm-topk-prob", o->norm_topk_prob, "renormalise top-k weights (0|1)")
      ->check(CLI::Range(0, 1));
  app.add_option("--max-position", o->max_pos, "max_position_embeddings");
  app.add_option("--dtype", o->dtype, "matrix dtype")->check(CLI::IsMember({"f32", "bf16"}));
  app.add_option("--seed", o->seed, "weight seed");
  app.add_option("--shard-bytes", o->shard_bytes,
                 "split weights into shards of at most this many bytes (0 = one file)");
  return [o]() {
    engine::model::ModelConfig c;
    c.model_type = o->type == "qwen2_moe" ? engine::model::ModelType::kQwen2Moe
                                          : engine::model::ModelType::kMixtral;
    c.vocab_size = o->vocab;
    c.hidden_size = o->hidden;
    c.num_layers = o->layers;
    c.num_heads = o->heads;
    c.num_kv_heads = o->kv_heads;
    c.head_dim = o->head_dim > 0 ? o->head_dim : (o->heads > 0 ? o->hidden / o->heads : 0);
    c.num_experts = o->experts;
    c.num_topk = o->topk;
    c.expert_ffn = o->ffn;
    c.shared_expert_ffn = o->shared_ffn;
    c.max_position_embeddings = o->max_pos;
    const bool qwen = c.model_type == engine::model::ModelType::kQwen2Moe;
    c.attention_bias = qwen;
    c.norm_topk_prob = o->norm_topk_prob < 0 ? !qwen : o->norm_topk_prob == 1;
    if (!qwen && !c.norm_topk_prob) {
      std::fprintf(stderr, "muflow make-model: mixtral always renormalises top-k weights; "
                           "--norm-topk-prob 0 needs --type qwen2_moe\n");
      return 2;
    }
    if (!qwen && c.shared_expert_ffn > 0) {
      std::fprintf(stderr, "muflow make-model: --shared-ffn needs --type qwen2_moe\n");
      return 2;
    }
    if (absl::Status s = c.validate(); !s.ok()) {
      std::fprintf(stderr, "muflow make-model: %s\n", std::string(s.message()).c_str());
      return 2;
    }
    const engine::model::DType dtype =
        o->dtype == "bf16" ? engine::model::DType::kBF16 : engine::model::DType::kF32;
    if (absl::Status s = engine::model::check_weights_fit_in_memory(
            c, dtype == engine::model::DType::kBF16 ? 2.0 : 4.0, 1.0, "muflow make-model");
        !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 2;
    }
    const engine::model::ModelWeights w = engine::model::make_synthetic_model(c, o->seed, dtype);
    if (absl::Status s = engine::model::write_hf_model(w, o->out, o->shard_bytes); !s.ok()) {
      std::fprintf(stderr, "muflow make-model: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    std::printf("wrote %s model to %s (seed %llu, %s)\n",
                engine::model::model_type_name(c.model_type), o->out.c_str(),
                static_cast<unsigned long long>(o->seed), o->dtype.c_str());
    return 0;
  };
}

}  // namespace muflow::tools
