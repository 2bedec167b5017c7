// The embedded default topology (used when no topology file is given: the shipped KJV model)
// and the synthetic demo (the base of every topology file) with its synthetic model.

#include "absl/status/status.h"
#include "engine/model/embedded_model.hpp"
#include "engine/sv_cat.hpp"
#include "engine/topology/topology.hpp"

namespace muflow::engine::topology {

model::ModelConfig default_synthetic_config() {
  model::ModelConfig c;
  c.model_type = model::ModelType::kMixtral;
  c.vocab_size = 512;
  c.hidden_size = 128;
  c.num_layers = 4;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  c.num_experts = 8;
  c.num_topk = 2;
  c.expert_ffn = 256;
  c.shared_expert_ffn = 0;
  c.norm_topk_prob = true;
  c.attention_bias = false;
  c.tie_word_embeddings = false;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

absl::StatusOr<Topology> default_topology() {
  absl::StatusOr<std::string> dir = model::embedded_model_dir();
  if (!dir.ok()) {
    return absl::Status(dir.status().code(),
                        sv_cat("the embedded default topology needs its model: ",
                               dir.status().message(), "; or run the synthetic demo, which "
                               "needs no model files (`muflow run --synthetic`)"));
  }
  Topology t;
  t.source = "<embedded default>";
  t.wiring = "sync";
  t.backend = "cpu";
  for (int i = 0; i < 2; ++i) t.devices.push_back(DeviceSpec{sv_cat("cpu", i), "cpu", "node0"});
  t.model.path = *std::move(dir);
  t.placement = "round-robin";
  t.workload.kind = "prompts";
  for (std::string_view p : kDefaultPrompts) t.workload.prompts.emplace_back(p);
  t.workload.max_new_tokens = kDefaultMaxNewTokens;
  t.sampling = SamplingSpec{};  // greedy, stops at EOS
  t.scheduler = SchedulerSpec{};
  t.trace_file.clear();
  return t;
}

Topology synthetic_demo_topology() {
  Topology t;
  t.source = "<embedded synthetic demo>";
  t.wiring = "sync";
  t.backend = "cpu";
  for (int i = 0; i < 4; ++i) t.devices.push_back(DeviceSpec{sv_cat("cpu", i), "cpu", "node0"});
  const model::ModelConfig config = default_synthetic_config();
  t.model.synthetic = config;
  t.model.seed = 0;
  t.model.dtype = "f32";
  t.placement = "round-robin";
  // Built-in prompts: BOS followed by a fixed pseudo-random walk over ids [3, vocab); lengths
  // 3..20 so continuous batching sees prompts of different sizes.
  t.workload.kind = "ids";
  const int lengths[] = {3, 7, 12, 20, 5, 16};
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> prompt = {static_cast<int32_t>(config.bos_token_id)};
    for (int j = 1; j < lengths[i]; ++j) {
      prompt.push_back(static_cast<int32_t>(3 + (i * 97 + j * 31 + i * j * 7) %
                                                    (config.vocab_size - 3)));
    }
    t.workload.prompt_ids.push_back(std::move(prompt));
  }
  t.workload.max_new_tokens = 16;
  t.sampling = SamplingSpec{};  // greedy
  t.scheduler = SchedulerSpec{};
  t.trace_file.clear();
  return t;
}

}  // namespace muflow::engine::topology
