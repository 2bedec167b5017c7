#pragma once
/// \file
/// Writing ModelWeights as a Hugging Face model folder (what `muflow make-model` produces).

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "engine/model/model_weights.hpp"

namespace muflow::engine::model {

/// Writes `weights` to `dir` (created with its parents when missing) as
/// `config.json` (see `hf_config_json`; torch_dtype "bfloat16" when any matrix is BF16) and
///  - `model.safetensors` when `max_shard_bytes == 0` or everything fits in one shard, or
///  - `model-00001-of-0000N.safetensors` … plus `model.safetensors.index.json`
///    (`{"metadata": {"total_size": bytes}, "weight_map": {name: shard}}`), filling shards in
///    HF layout order and starting a new shard when the next tensor would pass
///    `max_shard_bytes` (a single tensor larger than the limit gets a shard of its own).
/// Each tensor is written in its own dtype, with `__metadata__` {"format": "pt"} so
/// transformers accepts the files. The weight file of the other layout (model.safetensors vs
/// the index) is removed so the folder is unambiguous; old shard files are left in place.
/// A tied model writes no lm_head.weight. The output loads back with `load_hf_model` to the
/// same values, and with transformers' `from_pretrained`.
///
/// Errors: InvalidArgument when the config is invalid, `max_shard_bytes < 0`, or a tensor is
/// missing, has the wrong shape or inconsistent storage (message names the tensor);
/// Internal / PermissionDenied naming the path when the folder or a file cannot be written.
/// Thread-safe for distinct `dir`s.
absl::Status write_hf_model(const ModelWeights& weights, const std::string& dir,
                            int64_t max_shard_bytes);

}  // namespace muflow::engine::model
