#pragma once
/// \file
/// Test helper: a RunContext whose wiring has started (no actors, no executors), as a wiring
/// sees it when a run begins: `num_devices` cpu devices, the model dims given, the default
/// placement for the wiring's traits. Failures are reported as gtest failures, and the step
/// that failed throws (absl::BadStatusOrAccess from `value()`), which ends the test.

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "actors/run_context.hpp"
#include "actors/wirings/registry.hpp"
#include "engine/planning/placement.hpp"

namespace muflow::testing {

/// The context of a run of wiring `name` (e.g. "sync") with `ctx->wiring` started.
inline std::shared_ptr<actors::RunContext> started_wiring(const std::string& name, int num_devices,
                                                          int64_t num_layers, int64_t num_experts,
                                                          int64_t num_topk) {
  absl::StatusOr<const actors::Wiring*> wiring = actors::find_wiring(name);
  EXPECT_TRUE(wiring.ok()) << wiring.status();
  auto ctx = std::make_shared<actors::RunContext>();
  ctx->topology.source = "<test>";
  ctx->topology.wiring = name;
  for (int d = 0; d < num_devices; ++d) {
    ctx->topology.devices.push_back({"cpu" + std::to_string(d)});
  }
  ctx->config.num_layers = num_layers;
  ctx->config.num_experts = num_experts;
  ctx->config.num_topk = num_topk;
  absl::StatusOr<engine::planning::Placement> p = engine::planning::make_placement(
      ctx->topology, num_experts, wiring.value()->traits().disaggregated_attention);
  EXPECT_TRUE(p.ok()) << p.status();
  ctx->placement = p.value();
  ctx->num_ranks = static_cast<int64_t>(p->rank_device.size());
  actors::WiringSetup setup{ctx->topology, ctx->config, ctx->placement};
  absl::StatusOr<std::shared_ptr<const actors::PreparedWiring>> prepared =
      wiring.value()->prepare(setup);
  EXPECT_TRUE(prepared.ok()) << prepared.status();
  absl::StatusOr<std::shared_ptr<const actors::WiringRun>> run = prepared.value()->start_run(*ctx);
  EXPECT_TRUE(run.ok()) << run.status();
  ctx->wiring = run.value();
  return ctx;
}

}  // namespace muflow::testing
