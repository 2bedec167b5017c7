#pragma once
/// \file
/// Loading a Hugging Face MoE model folder (config.json + safetensors) into ModelWeights,
/// and the HF tensor layout (names and shapes) shared by the loader, the writer and the
/// synthetic-model generator.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_weights.hpp"

namespace muflow::engine::model {

/// One tensor of the HF layout of a model.
struct HfTensorSlot {
  std::string name;              ///< HF name, e.g. "model.layers.3.mlp.experts.7.up_proj.weight"
  std::vector<int64_t> shape;    ///< the shape the config implies
  bool f32_only = false;         ///< vector-like: always float32 in memory (norms, biases,
                                 ///< embed, router, shared_expert_gate)
  WeightTensor* tensor = nullptr;  ///< where it lives in the ModelWeights
};

/// The same, for reading a const model (the writer).
struct ConstHfTensorSlot {
  std::string name;
  std::vector<int64_t> shape;
  bool f32_only = false;
  const WeightTensor* tensor = nullptr;
};

/// Every tensor slot of `weights->config` in file order (embed, layers 0..L-1, final norm,
/// lm_head unless tied). Resizes `weights->blocks` and each block's `experts` to match the
/// config first. HF names: see `model_weights.hpp` and README "Model folders".
/// Precondition: `weights->config.validate().ok()` (asserted).
std::vector<HfTensorSlot> hf_tensor_slots(ModelWeights* weights);

/// The slots of an existing model, for reading. Blocks/experts missing from `weights` (a
/// model whose vectors disagree with its config) give slots with `tensor == nullptr`.
std::vector<ConstHfTensorSlot> hf_tensor_slots(const ModelWeights& weights);

/// Loads an HF model folder: `dir/config.json` (see `parse_hf_config`) and either
/// `dir/model.safetensors` or the shards listed in `dir/model.safetensors.index.json`
/// (`{"weight_map": {tensor name: shard file name}}`; preferred only when model.safetensors
/// is absent).
///
/// Every tensor of the layout must be present with exactly the config's shape and dtype F32
/// or BF16. Vectors (norms, q/k/v biases, embed, router, shared_expert_gate) are converted to
/// float32 (exact for BF16); matrices (q, k, v, o, experts, shared expert, lm_head) keep the
/// stored dtype; dtypes may be mixed. With tie_word_embeddings, `lm_head` is a copy of `embed`
/// and a stored lm_head.weight is ignored. Tensors outside the layout are an error (a config
/// that disagrees with the file), except `*.rotary_emb.inv_freq` buffers.
///
/// Errors, each naming the file and the tensor or key: NotFound when config.json or both
/// weight files are missing, or a shard listed in the index is missing; InvalidArgument for
/// a bad config, a bad index, a missing tensor ("<file>: tensor 'x' not found"), a shape
/// mismatch ("<file>: tensor 'x' has shape [128,64], expected [128,128]"), an unsupported
/// dtype, an unexpected tensor, and every safetensors format error (truncation included).
///
/// Thread-safe (no shared state). The result is immutable and may be shared by all devices.
absl::StatusOr<std::shared_ptr<const ModelWeights>> load_hf_model(const std::string& dir);

}  // namespace muflow::engine::model
