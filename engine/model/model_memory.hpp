#pragma once
/// \file
/// How much memory a model's weights take, checked against the machine before they are built
/// or loaded (#15: bad dims must fail fast with a clear error, never an OOM kill).

#include <string_view>

#include "absl/status/status.h"
#include "engine/model/model_config.hpp"

namespace muflow::engine::model {

/// Bytes of every weight of `c` (embeddings, LM head unless tied, every block's attention,
/// router, shared expert, norms and all experts) at `bytes_per_element` (4 f32, 2 bf16).
/// A double: the product of bounded dims can exceed int64. Pure; any thread.
double model_weight_bytes(const ModelConfig& c, double bytes_per_element);

/// This machine's physical memory in bytes (sysconf), or 0 when it cannot be read.
double physical_memory_bytes();

/// OK when `copies` × model_weight_bytes fit in 80% of physical memory (or the memory is
/// unknown). Errors: ResourceExhausted naming `what` (e.g. the topology file), the bytes
/// needed and the memory there is.
absl::Status check_weights_fit_in_memory(const ModelConfig& c, double bytes_per_element,
                                         double copies, std::string_view what);

}  // namespace muflow::engine::model
