#pragma once
/// \file
/// The `sim` backend: no math; every stage takes the time the roofline cost model of its
/// device kind gives (engine/exec/sim_executor.hpp), transfers cross the big-switch network
/// (transport/sim_network_channel.hpp), and the run goes in virtual time (deterministic).
/// The model is its dims only: a preset, synthetic dims, or an HF folder's config.json.

#include <memory>

#include "absl/status/statusor.h"
#include "actors/backends/backend.hpp"

namespace muflow::actors {

/// Reads the model's dims and builds the router, cost and link models. Errors: config.json's
/// (file and key named); InvalidArgument for bad dims, an unknown device kind, link class or
/// router, or a topology that does not fit the model.
absl::StatusOr<std::unique_ptr<Backend>> make_sim_backend(
    const engine::topology::Topology& topology);

}  // namespace muflow::actors
