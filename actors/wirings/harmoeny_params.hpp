#pragma once
/// \file
/// Resolves the `harmoeny` wiring's options for one run (defaults of engine::topology::HarmoenySpec
/// filled in from the placement and, on sim, the device and host-link models).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/backends/sim_setup.hpp"
#include "engine/model/model_config.hpp"
#include "engine/planning/placement.hpp"
#include "engine/topology/topology.hpp"
#include "kernels/sim/precision.hpp"

namespace muflow::actors {

/// The `harmoeny` wiring's resolved options (engine::topology::HarmoenySpec with defaults filled
/// in).
struct HarmoenyParams {
  int64_t q = 1;         ///< token transfer threshold (HarMoEny Eq. 4), tokens, >= 1
  bool paper = true;     ///< Algorithm 2 (true) or the public code's variant
  int64_t slots = 0;     ///< expert slots per device
  bool prefetch = true;  ///< asynchronous copies into freed slots
  /// [num_devices] seconds to copy one expert's weights from host memory (sim: the host
  /// link model; cpu: 0, the weights are already in memory).
  std::vector<double> copy_s;
};

/// HarmoenyParams for `topology` (its [harmoeny] table) with the model `config` placed by
/// `placement`:
///  - slots: topology value, or the most experts any device hosts (E / devices);
///  - q: topology value, or Eq. 4 (engine::planning::harmoeny_default_q) from device 0's
///    peak FLOP/s at `precision` and its host link's bandwidth (`host_link_for`), with d_type =
///    `weight_bytes` per element: on sim the modeled kind, on cpu the "cpu" kind's table
///    (kernels/sim/device_kind.cpp), so a cpu run and its sim use the same q (f32: 11, bf16:
///    12; HarMoEny's public code hard-codes 150 for its GPUs, ../shared/seeds/NOTES.md);
///  - copy_s[d]: on sim the host link's time for one expert's weights (gate, up, down:
///    3 · hidden · ffn · weight_bytes, or 2 · for ungated experts); on cpu 0.
/// `sim` is null on real backends; `rate_kind` is their Backend::rate_kind (the kind whose
/// table gives q on cuda, e.g. "H200"; empty: device 0's topology kind, "cpu" on cpu). Errors:
/// InvalidArgument naming `[harmoeny] slots` when the slots cannot hold a device's home experts or
/// exceed the model's experts, or when Eq. 4 fails; NotFound for an unknown device kind or link
/// class (the parser checks both first).
absl::StatusOr<HarmoenyParams> resolve_harmoeny(
    const engine::topology::Topology& topology, const engine::model::ModelConfig& config,
    const engine::planning::Placement& placement, const SimSetup* sim,
    kernels::sim::Precision precision, int64_t weight_bytes, const std::string& rate_kind = "");

}  // namespace muflow::actors
