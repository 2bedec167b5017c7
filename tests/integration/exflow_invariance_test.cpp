// Invariant 1 for the `exflow` wiring (ExFlow §IV, context-coherent EP): a decode token
// continues on the rank of its top-1 expert's device and reads the block's shared KV cache
// there, so its path through the devices changes, but every row is computed by the same
// batch-invariant kernels and merged in top-k order: tokens and prompt logits must equal the
// single-device reference bitwise. Also: the affinity placement planned from a run's recorded
// paths changes where experts live per block, never the answer, and moves fewer rows.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "actors/server.hpp"
#include "invariance_fixtures.hpp"
#include "scratch_path.hpp"

namespace muflow {
namespace {

namespace fs = std::filesystem;
using engine::topology::Topology;
using testing_fixtures::on_devices;
using testing_fixtures::run_topology;
using testing_fixtures::small_mixtral;
using testing_fixtures::small_qwen2moe;
using testing_fixtures::topology_for;

fs::path scratch(const std::string& name) {
  fs::path p = muflow::testing::scratch_path("exflow_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// exflow on 2, 3 and 4 devices with round-robin placement, then with the affinity placement
// planned from the paths sync recorded: bitwise equal to the reference.
// Under top-1 a decode token's only output is computed where it continues, so exflow's
// combine moves fewer rows off-device than sync's; with the affinity placement the whole
// all-to-all traffic (dispatch + combine rows off-device) drops below sync's.
void expect_exflow_bitwise(Topology base, int num_requests, const std::string& name) {
  const testing_fixtures::Reference ref =
      testing_fixtures::reference_for(base, num_requests, 17);
  ASSERT_EQ(ref.tokens.size(), static_cast<size_t>(num_requests));
  const int64_t topk = base.model.synthetic ? base.model.synthetic->num_topk : 2;
  for (int devices : {2, 3, 4}) {
    const std::string what = name + ", exflow on " + std::to_string(devices) + " devices";
    const actors::RunOutcome sync = run_topology(on_devices(base, devices, "sync"), ref.requests);
    const actors::RunOutcome out = run_topology(on_devices(base, devices, "exflow"), ref.requests);
    ASSERT_EQ(out.outputs.size(), ref.requests.size()) << what;
    testing_fixtures::expect_outputs_match(out.outputs, ref.tokens, ref.logits, what);
    EXPECT_EQ(out.metrics.num_completed_requests, num_requests) << what;
    EXPECT_EQ(out.metrics.combine_rows, sync.metrics.combine_rows) << what;
    // Tokens really continued away from home (the outputs went elsewhere than under sync).
    if (topk == 1) {
      EXPECT_LT(out.metrics.combine_remote_rows, sync.metrics.combine_remote_rows) << what;
    } else {
      EXPECT_NE(out.metrics.combine_remote_rows, sync.metrics.combine_remote_rows) << what;
    }
  }
  // Affinity placement from the paths a sync run recorded, on the most devices (of 4, 3, 2)
  // that the experts divide over (it gives every device the same number per block).
  const int64_t experts = base.model.synthetic ? base.model.synthetic->num_experts : 8;
  const int devices = experts % 4 == 0 ? 4 : experts % 3 == 0 ? 3 : 2;
  const fs::path dir = scratch(name);
  Topology record = on_devices(base, devices, "sync");
  record.routing_record_file = (dir / "paths.csv").string();
  const actors::RunOutcome sync = run_topology(record, ref.requests);
  ASSERT_TRUE(fs::exists(record.routing_record_file)) << name;
  Topology affinity = on_devices(base, devices, "exflow");
  affinity.placement = "affinity";
  affinity.affinity_paths = record.routing_record_file;
  const actors::RunOutcome out = run_topology(affinity, ref.requests);
  const std::string what = name + ", exflow + affinity placement";
  testing_fixtures::expect_outputs_match(out.outputs, ref.tokens, ref.logits, what);
  EXPECT_LT(out.metrics.dispatch_remote_rows + out.metrics.combine_remote_rows,
            sync.metrics.dispatch_remote_rows + sync.metrics.combine_remote_rows)
      << what;
  // sync with the same per-block placement: also the reference's answer.
  affinity.wiring = "sync";
  testing_fixtures::expect_outputs_match(run_topology(affinity, ref.requests).outputs, ref.tokens,
                                         ref.logits, name + ", sync + affinity placement");
}

TEST(ExflowInvariance, SyntheticMixtralTop1) {
  Topology t;
  t.model.synthetic = small_mixtral(1);
  t.model.seed = 61;
  expect_exflow_bitwise(t, 8, "top1");
}

TEST(ExflowInvariance, SyntheticMixtralTop2) {
  Topology t;
  t.model.synthetic = small_mixtral(2);
  t.model.seed = 62;
  expect_exflow_bitwise(t, 8, "top2");
}

// Top-3 makes the merge order observable in float (see the sync invariance test).
TEST(ExflowInvariance, SyntheticMixtralTop3) {
  Topology t;
  t.model.synthetic = small_mixtral(3);
  t.model.seed = 63;
  expect_exflow_bitwise(t, 6, "top3");
}

TEST(ExflowInvariance, SyntheticQwen2MoeSharedExpert) {
  Topology t;
  t.model.synthetic = small_qwen2moe();
  t.model.seed = 64;
  expect_exflow_bitwise(t, 6, "qwen");
}

TEST(ExflowInvariance, TrainedKjvModel) {
  const std::string dir = std::string(MUFLOW_DATA_DIR) + "/models/kjv-mixtral-tiny";
  if (!fs::exists(dir + "/model.safetensors")) {
    GTEST_SKIP() << "real model not found at " << dir << " (../shared/data absent)";
  }
  Topology t;
  t.model.path = dir;
  t.sampling.stop_at_eos = false;
  expect_exflow_bitwise(t, 6, "kjv");
}

// The affinity placement is a setup step with clear errors.
TEST(ExflowSetup, AffinityPlacementErrors) {
  Topology t = on_devices(Topology{}, 4, "async");
  t.model.synthetic = small_mixtral(1);
  t.placement = "affinity";
  const fs::path dir = scratch("errors");
  t.affinity_paths = (dir / "paths.csv").string();
  std::ofstream(t.affinity_paths) << "request_id,position,block,experts,weights\n0,0,0,1,1\n";
  absl::StatusOr<std::unique_ptr<actors::Server>> server = actors::Server::create(t);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find(
                "<test>: key 'placement.experts' = \"affinity\": needs wiring \"sync\" or "
                "\"exflow\", got \"async\""),
            std::string::npos)
      << server.status();
  t.wiring = "exflow";
  std::ofstream(t.affinity_paths) << "request_id,position,block,experts,weights\n0,0,7,1,1\n";
  server = actors::Server::create(t);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("paths.csv"), std::string::npos) << server.status();
  std::ofstream(t.affinity_paths) << "request_id,position,block,experts,weights\n0,0,0,1,1\n";
  t.devices = topology_for(4).devices;  // nodes of 3 and 1 devices: no two-stage grid
  t.devices[3].node = "node1";
  server = actors::Server::create(t);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("same number of devices on every node"),
            std::string::npos)
      << server.status();
  t.devices = topology_for(3).devices;  // 8 experts do not divide over 3 devices
  server = actors::Server::create(t);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("'placement.experts' = \"affinity\""),
            std::string::npos)
      << server.status();
}

}  // namespace
}  // namespace muflow
