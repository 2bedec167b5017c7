#pragma once
// A tiny synthetic model on N virtual cpu devices for server and engine tests: vocab 97,
// hidden 32, 2 layers, 4 experts top-2, seed 21, greedy, no EOS stop, 5 prefill tokens a step.
#include <string>

#include "engine/topology/topology.hpp"

namespace muflow::testing_fixtures {

inline engine::topology::Topology small_topology(int num_devices, int64_t max_position = 4096) {
  engine::topology::Topology t;
  t.source = "<test>";
  for (int d = 0; d < num_devices; ++d) t.devices.push_back({"cpu" + std::to_string(d)});
  engine::model::ModelConfig c;
  c.vocab_size = 97;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.num_experts = 4;
  c.num_topk = 2;
  c.expert_ffn = 40;
  c.max_position_embeddings = max_position;
  t.model.synthetic = c;
  t.model.seed = 21;
  t.sampling.stop_at_eos = false;
  t.scheduler.max_prefill_tokens = 5;
  return t;
}

}  // namespace muflow::testing_fixtures
