#pragma once
/// \file
/// Checks that a model's weights have the shapes its config says, before a backend prepares
/// them (engine/exec/cpu_model.hpp, cuda_model.hpp).

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/model_weights.hpp"

namespace muflow::engine::model {

/// Every tensor a backend reads: embedding, final norm and LM head; per block the norms, q, k,
/// v, o, the router and every expert's gate, up and down; the shared expert and its gate when
/// the config has one (shapes in model_weights.hpp). Attention biases are checked by the
/// backends that read them. Errors: InvalidArgument naming the tensor, its shape and the
/// expected one, or the block and expert counts; the config's own validate() errors.
absl::Status check_weight_shapes(const ModelWeights& weights);

/// Block `block`'s q, k and v biases concatenated ([qd + 2·kvd] f32, the fused q|k|v GEMM's
/// bias); empty when the config has no attention bias. Errors: InvalidArgument naming a
/// missing or empty bias tensor, or a total that is not qd + 2·kvd.
absl::StatusOr<std::vector<float>> fused_qkv_bias(const ModelConfig& c, const BlockWeights& bw,
                                                  int64_t block);

}  // namespace muflow::engine::model
