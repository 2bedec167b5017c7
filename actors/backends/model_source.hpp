#pragma once
/// \file
/// The weights a real-math backend (cpu, cuda) computes with: the topology's `[model] path`
/// (a Hugging Face folder) or its synthetic dims.

#include <memory>

#include "absl/status/statusor.h"
#include "engine/model/model_weights.hpp"
#include "engine/topology/topology.hpp"

namespace muflow::actors {

/// Loads `[model] path`, or builds the synthetic model (`seed`, `dtype`) after checking that
/// it and one prepared copy (`prepared_copies` more bytes per weight byte) fit in host
/// memory. Errors: the loader's (file and tensor named); InvalidArgument when [model] has
/// neither a path nor synthetic dims, or the synthetic dims are invalid; ResourceExhausted
/// when they do not fit.
absl::StatusOr<std::shared_ptr<const engine::model::ModelWeights>> load_model_weights(
    const engine::topology::Topology& topology, double prepared_copies);

}  // namespace muflow::actors
