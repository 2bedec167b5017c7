#pragma once
/// \file
/// The `cuda` backend (issue #20): real math on NVIDIA GPUs. Every device of the topology is
/// a virtual device on GPU (index mod the GPUs the process sees), with its own stream,
/// scratch and paged KV cache (engine/exec/cuda_executor.hpp); the weights are uploaded once
/// per GPU and shared by its virtual devices. Activations travel between devices through
/// host memory (transport::InProcessChannel, as cpu); real time.

#include <memory>

#include "absl/status/statusor.h"
#include "actors/backends/backend.hpp"

namespace muflow::actors {

/// Loads the topology's model and uploads it to every GPU a device maps to. Errors: the
/// loader's; FailedPrecondition when no GPU is found (the CUDA runtime's reason named) or a GPU
/// cannot run the kernels (older than sm_80, or too little shared memory per block: sm_86/89);
/// InvalidArgument for a topology that does not fit the model (and for moeshard over bf16
/// weights whose shard boundaries are not multiples of 8 intermediate units);
/// ResourceExhausted when a GPU's memory is too small.
absl::StatusOr<std::unique_ptr<Backend>> make_cuda_backend(
    const engine::topology::Topology& topology);

}  // namespace muflow::actors
