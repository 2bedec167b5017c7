#pragma once
/// \file
/// The `cpu` backend: real math on virtual CPU devices in one process (oneDNN GEMMs and
/// batch-invariant kernels, engine/exec/cpu_model.hpp), in-process handoff between devices, real
/// time. Weights come from a Hugging Face folder or a synthetic model built in memory.

#include <memory>

#include "absl/status/statusor.h"
#include "actors/backends/backend.hpp"

namespace muflow::actors {

/// Loads and prepares the topology's model. Errors: the loader's (file and tensor named);
/// InvalidArgument for a missing [model] or a topology that does not fit it.
absl::StatusOr<std::unique_ptr<Backend>> make_cpu_backend(
    const engine::topology::Topology& topology);

}  // namespace muflow::actors
