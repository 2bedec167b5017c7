// HarMoEny's token threshold q (Eq. 4) is resolved from the same rates on the cpu backend and
// on a sim of the same topology with device kind "cpu", so the sim predicts a cpu run that
// rebalances the way it does (#19 item 3: with q = 150 on cpu and Eq. 4's 9 on the sim, the
// sim rebalanced far more tokens and predicted a 27 % lower TTFT).
#include "actors/wirings/harmoeny_params.hpp"

#include <gtest/gtest.h>

#include <string>

#include "actors/backends/backend.hpp"
#include "actors/backends/sim_setup.hpp"
#include "engine/planning/harmoeny_rebalance.hpp"
#include "engine/planning/placement.hpp"
#include "invariance_fixtures.hpp"
#include "kernels/sim/device_kind.hpp"

namespace muflow::testing_fixtures {
namespace {

Topology harmoeny_topology(const std::string& backend, const std::string& dtype) {
  Topology t = topology_for(2);
  t.backend = backend;
  t.wiring = "harmoeny";
  t.model.synthetic = small_mixtral(2);
  t.model.dtype = dtype;
  return t;
}

// What the Server does: the backend's precision and weight bytes, then resolve_harmoeny.
int64_t resolved_q(const Topology& t) {
  absl::StatusOr<std::unique_ptr<actors::Backend>> backend = actors::make_backend(t);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return -1;
  absl::StatusOr<engine::planning::Placement> placement =
      engine::planning::make_placement(t, t.model.synthetic->num_experts);
  EXPECT_TRUE(placement.ok()) << placement.status();
  if (!placement.ok()) return -1;
  absl::StatusOr<actors::HarmoenyParams> p =
      actors::resolve_harmoeny(t, *t.model.synthetic, *placement, (*backend)->sim(),
                               (*backend)->precision(), t.model.dtype == "bf16" ? 2 : 4);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? p->q : -1;
}

TEST(HarmoenyParams, CpuRunAndItsSimResolveTheSameQFromEq4) {
  const kernels::sim::DeviceKind cpu = *kernels::sim::find_device_kind("cpu");
  for (const std::string dtype : {"f32", "bf16"}) {
    const bool bf16 = dtype == "bf16";
    const int64_t on_cpu = resolved_q(harmoeny_topology("cpu", dtype));
    const int64_t on_sim = resolved_q(harmoeny_topology("sim", dtype));
    EXPECT_EQ(on_cpu, on_sim) << dtype;
    // Eq. 4 with the kind's rates: peak FLOP/s at the dtype, its memory copy rate as the host
    // link (f32: 0.1e12 · 4 / (2 · 19e9) = 10.5 → 11; bf16: 0.22e12 · 2 / (2 · 19e9) = 11.6 → 12).
    const int64_t want = *engine::planning::harmoeny_default_q(
        cpu.peak_flops(bf16 ? kernels::sim::Precision::kBF16 : kernels::sim::Precision::kF32),
        cpu.host_link_bytes_per_s, bf16 ? 2.0 : 4.0);
    EXPECT_EQ(on_cpu, want) << dtype;
    EXPECT_EQ(want, bf16 ? 12 : 11) << dtype;
  }
}

TEST(HarmoenyParams, TopologyQWinsOnBothBackends) {
  for (const std::string backend : {"cpu", "sim"}) {
    Topology t = harmoeny_topology(backend, "f32");
    t.harmoeny.q = 150;
    EXPECT_EQ(resolved_q(t), 150) << backend;
  }
}

TEST(HarmoenyParams, SimHostLinkOfACpuDeviceIsItsMemoryAndOfAGpuItsPcie) {
  Topology t = harmoeny_topology("sim", "f32");
  const kernels::sim::DeviceKind cpu = *kernels::sim::find_device_kind("cpu");
  absl::StatusOr<transport::LinkClass> link = actors::host_link_for(t, cpu);
  ASSERT_TRUE(link.ok()) << link.status();
  EXPECT_DOUBLE_EQ(link->bandwidth_bytes_per_s, cpu.host_link_bytes_per_s);
  const kernels::sim::DeviceKind h100 = *kernels::sim::find_device_kind("H100-SXM");
  link = actors::host_link_for(t, h100);
  ASSERT_TRUE(link.ok()) << link.status();
  EXPECT_DOUBLE_EQ(link->bandwidth_bytes_per_s, transport::links::kPcie5x16.bandwidth_bytes_per_s);
  // The topology's key wins, for a cpu device too.
  t.network.host_link = "pcie3-x16";
  link = actors::host_link_for(t, cpu);
  ASSERT_TRUE(link.ok()) << link.status();
  EXPECT_DOUBLE_EQ(link->bandwidth_bytes_per_s, transport::links::kPcie3x16.bandwidth_bytes_per_s);
  t.network.host_link = "pcie9";
  link = actors::host_link_for(t, cpu);
  ASSERT_FALSE(link.ok());
  EXPECT_NE(link.status().message().find("network.host_link"), std::string::npos) << link.status();
}

}  // namespace
}  // namespace muflow::testing_fixtures
