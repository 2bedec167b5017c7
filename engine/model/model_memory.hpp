#pragma once
/// \file
/// How much memory a model's weights take, checked against the machine before they are built
/// or loaded (#15: bad dims must fail fast with a clear error, never an OOM kill).

#include <string_view>

#include "absl/status/status.h"
#include "engine/model/model_config.hpp"

namespace muflow::engine::model {

/// Bytes of the weights a device holds at `bytes_per_element` (4 f32, 2 bf16): with
/// `hosts_attention`, every block's attention, router, shared expert and norms plus the
/// embeddings, final norm and LM head (unless tied); and `num_experts` experts of every block.
/// A double: products of dims can exceed int64. The one formula of the project (the sim's
/// per-device memory, serving::resident_weight_bytes, uses it). Pure; any thread.
double weight_bytes(const ModelConfig& c, bool hosts_attention, int64_t num_experts,
                    double bytes_per_element);

/// Bytes of every weight of `c`: weight_bytes(c, true, c.num_experts, bytes_per_element).
double model_weight_bytes(const ModelConfig& c, double bytes_per_element);

/// This machine's physical memory in bytes (sysconf), or 0 when it cannot be read.
double physical_memory_bytes();

/// OK when `copies` × model_weight_bytes fit in 80% of physical memory (or the memory is
/// unknown). Errors: ResourceExhausted naming `what` (e.g. the topology file), the bytes
/// needed and the memory there is.
absl::Status check_weights_fit_in_memory(const ModelConfig& c, double bytes_per_element,
                                         double copies, std::string_view what);

}  // namespace muflow::engine::model
