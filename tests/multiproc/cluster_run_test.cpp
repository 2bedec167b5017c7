// Runs that span processes (#18 item 1 and its "must show"): every wiring, with its devices in
// 2 and 3 `muflow worker` processes on loopback (and one device left with the driver), gives
// the same tokens and bitwise the same prompt logits as the same topology in one process, on
// the KJV tiny Mixtral and on a synthetic Qwen2-MoE. Also: a topology's worker entries are
// checked when it is parsed, and a run whose worker has the wrong token fails with a clear
// error instead of hanging.

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "actors/cluster/cluster_driver.hpp"
#include "actors/cluster/worker_launcher.hpp"
#include "actors/server.hpp"
#include "engine/topology/topology.hpp"
#include "multiproc/cluster_test_topology.hpp"
#include <nlohmann/json.hpp>
#include "scratch_path.hpp"

namespace muflow::actors::cluster {
namespace {

const char* kClusterRunToken = "cluster-run-test-token-0123456789abcdef";

// Three loopback workers for the whole suite (each run joins the ones its topology lists;
// worker i is always process i + 1).
class ClusterRunTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ::setenv("MUFLOW_CLUSTER_TOKEN", kClusterRunToken, 1);
    auto w = LaunchedWorkers::launch(MUFLOW_BINARY, {"127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"},
                                     kClusterRunToken);
    ASSERT_TRUE(w.ok()) << w.status();
    workers_ = std::move(*w);
  }
  static void TearDownTestSuite() { workers_.reset(); }
  static inline std::unique_ptr<LaunchedWorkers> workers_;
};

struct Case {
  std::string wiring;
  bool qwen;
};

class EveryWiring : public ClusterRunTest, public ::testing::WithParamInterface<Case> {};

TEST_P(EveryWiring, TwoAndThreeWorkersMatchOneProcess) {
  const Case& c = GetParam();
  ASSERT_TRUE(workers_);
  const auto& a = workers_->addresses();
  auto one = run_text(topology_text(c.wiring, 4, c.qwen, {}, {}), nullptr);
  ASSERT_TRUE(one.ok()) << one.status();
  // 2 workers host every device; 3 workers host three, the driver keeps device 3.
  const std::vector<std::vector<std::vector<int>>> layouts = {{{0, 2}, {1, 3}}, {{0}, {1}, {2}}};
  for (const auto& layout : layouts) {
    const std::string what = absl::StrCat(c.wiring, c.qwen ? " (qwen2-moe)" : " (kjv)", " on ",
                                          layout.size(), " workers");
    auto many = run_text(topology_text(c.wiring, 4, c.qwen, layout, a), nullptr);
    ASSERT_TRUE(many.ok()) << what << ": " << many.status();
    expect_same(*one, *many, what);
    // Each barrier is replicated in the processes of its sources and destinations, and only
    // its primary replica (DP rank 0's process) reports it: every row counted once, none
    // missing (its reports leave before its sampled rows), the layer times on one clock.
    EXPECT_EQ(many->metrics.combine_rows, one->metrics.combine_rows) << what;
    EXPECT_EQ(many->metrics.combine_remote_rows, one->metrics.combine_remote_rows) << what;
    EXPECT_EQ(many->metrics.dispatch_rows, one->metrics.dispatch_rows) << what;
    EXPECT_EQ(many->metrics.dispatch_remote_rows, one->metrics.dispatch_remote_rows) << what;
    EXPECT_EQ(many->metrics.tokens_rebalanced, one->metrics.tokens_rebalanced) << what;
    // Every MoE layer's start (dispatch) and end (combine) paired up.
    EXPECT_EQ(many->metrics.moe_layer.num_samples, one->metrics.moe_layer.num_samples) << what;
    if (c.wiring.rfind("async", 0) != 0) {  // the barrier wirings
      EXPECT_GT(many->metrics.combine_rows, 0) << what;
      EXPECT_GT(many->metrics.moe_layer.num_samples, 0) << what;
      EXPECT_GT(many->metrics.moe_layer.p50_ms, 0.0) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cluster, EveryWiring,
                         ::testing::Values(Case{"sync", false}, Case{"async", false},
                                           Case{"harmoeny", false}, Case{"moeshard", false},
                                           Case{"exflow", false}, Case{"async-replicated", false},
                                           Case{"sync", true}, Case{"async", true},
                                           Case{"harmoeny", true}, Case{"moeshard", true},
                                           Case{"exflow", true}, Case{"async-replicated", true}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string name =
                               info.param.wiring + (info.param.qwen ? "_qwen2moe" : "_kjv");
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

// The run's trace covers every process: the workers' devices' stage slices come back to the
// driver, on its clock (inside the run's window), next to its own devices' slices.
TEST_F(ClusterRunTest, TheTraceHoldsTheWorkersDevices) {
  ASSERT_TRUE(workers_);
  const auto& a = workers_->addresses();
  // Worker 0 hosts device 0, worker 1 device 1; the driver keeps devices 2 and 3.
  auto topo = engine::topology::parse_topology_string(
      topology_text("sync", 4, true, {{0}, {1}}, a), "<cluster test>", MUFLOW_SOURCE_DIR);
  ASSERT_TRUE(topo.ok()) << topo.status();
  const std::string path = muflow::testing::scratch_path("cluster-trace.json").string();
  topo->trace_file = path;
  auto server = Server::create(*topo);
  ASSERT_TRUE(server.ok()) << server.status();
  auto group = make_cluster_driver(*topo);
  ASSERT_TRUE(group.ok()) << group.status();
  (*server)->set_process_group(std::move(*group));
  auto out = (*server)->run(requests((*server)->config().vocab_size));
  ASSERT_TRUE(out.ok()) << out.status();
  std::ifstream in(path);
  nlohmann::json trace = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(trace.is_discarded()) << path;
  const double end_us = out->metrics.duration_s * 1e6;
  std::map<int64_t, int> slices;  // device -> stage slices
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || e.value("cat", "") == "wait") continue;
    const double ts = e["ts"].get<double>();
    const int64_t device = e["pid"].get<int64_t>();
    ++slices[device];
    // Within the run (a worker's clock origin is placed within half a round trip: 5 ms).
    EXPECT_GT(ts, -5000.0) << e.dump();
    EXPECT_LT(ts + e["dur"].get<double>(), end_us + 5000.0) << e.dump();
  }
  for (int64_t d = 0; d < 4; ++d) {
    EXPECT_GT(slices[d], 0) << "no stage slice of device " << d << " ("
                            << (d < 2 ? "a worker's" : "the driver's") << ")";
  }
}

TEST_F(ClusterRunTest, WorkerEntriesAreCheckedWhenParsed) {
  auto parse = [](const std::string& workers) {
    return engine::topology::parse_topology_string(
        "backend = \"cpu\"\n[cluster]\nnum_devices = 2\n" + workers + model_table(true), "t.toml",
        MUFLOW_SOURCE_DIR);
  };
  auto ok = parse("[[cluster.workers]]\naddress = \"127.0.0.1:7101\"\ndevices = [1]\n");
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->workers.size(), 1u);
  EXPECT_EQ(ok->workers[0].devices, std::vector<int64_t>{1});
  auto out_of_range = parse("[[cluster.workers]]\naddress = \"127.0.0.1:7101\"\ndevices = [2]\n");
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.status().message().find("t.toml:6: key 'cluster.workers[0].devices'"),
            std::string::npos)
      << out_of_range.status();
  auto twice = parse(
      "[[cluster.workers]]\naddress = \"127.0.0.1:7101\"\ndevices = [0]\n"
      "[[cluster.workers]]\naddress = \"127.0.0.1:7102\"\ndevices = [0]\n");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("device 0 is listed by two workers"), std::string::npos)
      << twice.status();
  auto no_port = parse("[[cluster.workers]]\naddress = \"localhost\"\ndevices = [0]\n");
  ASSERT_FALSE(no_port.ok());
  EXPECT_NE(no_port.status().message().find("expected \"HOST:PORT\""), std::string::npos)
      << no_port.status();
}

TEST_F(ClusterRunTest, WrongTokenFailsTheRunWithAClearError) {
  ASSERT_TRUE(workers_);
  const std::string text = topology_text("sync", 2, true, {{0}}, {workers_->addresses()[0]});
  auto topo = engine::topology::parse_topology_string(text, "<cluster test>", MUFLOW_SOURCE_DIR);
  ASSERT_TRUE(topo.ok()) << topo.status();
  ::setenv("MUFLOW_CLUSTER_TOKEN", "a-different-token-of-enough-bytes", 1);
  auto group = make_cluster_driver(*topo);
  ::setenv("MUFLOW_CLUSTER_TOKEN", kClusterRunToken, 1);
  ASSERT_TRUE(group.ok()) << group.status();
  auto server = Server::create(*topo);
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->set_process_group(std::move(*group));
  auto out = (*server)->run(requests((*server)->config().vocab_size));
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::IsPermissionDenied(out.status())) << out.status();
  // The worker still serves a driver with the right token afterwards.
  auto right = run_text(text, nullptr);
  EXPECT_TRUE(right.ok()) << right.status();
}

// A message above the data plane's limit (here the driver's, set small) fails the run with the
// reason instead of leaving it waiting for a message that was never sent: the driver refuses
// to send such a batch to the worker and drops one the worker sends it, and either fails the
// run.
TEST_F(ClusterRunTest, AMessageAboveTheDataPlaneLimitFailsTheRunWithTheReason) {
  ASSERT_TRUE(workers_);
  const std::string text = topology_text("sync", 2, true, {{1}}, {workers_->addresses()[0]});
  ClusterDriverOptions options;
  options.max_message_bytes = 600;  // a frame of a few 64-wide rows; a 7-token chunk is more
  auto out = run_text(text, nullptr, options);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("max_message_bytes"), std::string::npos) << out.status();
  // The worker serves the next run, whose driver has the default limit.
  auto right = run_text(text, nullptr);
  EXPECT_TRUE(right.ok()) << right.status();
}

// The same from a worker: its sampler's prompt logits (100 positions x 4,096 floats, 1.6 MB
// per request) are above its own limit (--max-message-mib 1), so it refuses to send them and
// tells the driver, whose run fails with the reason instead of waiting for the logits.
TEST_F(ClusterRunTest, AWorkersMessageAboveItsLimitFailsTheRunWithTheReason) {
  auto small = LaunchedWorkers::launch(MUFLOW_BINARY, {"127.0.0.1:0"}, kClusterRunToken,
                                       {"--max-message-mib", "1"});
  ASSERT_TRUE(small.ok()) << small.status();
  // Every rank a request, so DP rank 1 (the worker's device) samples one; whole prompts in one
  // chunk, so its logits leave as one message.
  std::string text = topology_text("sync", 2, false, {{1}}, {(*small)->addresses()[0]});
  const std::string chunk = "max_prefill_tokens = 7\n";
  ASSERT_NE(text.find(chunk), std::string::npos);
  text.replace(text.find(chunk), chunk.size(), "max_prefill_tokens = 512\n");
  std::vector<engine::serving::Request> reqs;
  for (int i = 0; i < 4; ++i) {
    engine::serving::Request r;
    r.id = i;
    r.max_new_tokens = 2;
    r.return_prompt_logits = true;
    for (int j = 0; j < 100; ++j)
      r.prompt.push_back(static_cast<int32_t>(3 + (i * 100 + j) % 4000));
    reqs.push_back(std::move(r));
  }
  auto out = run_text(text, &reqs);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("worker process 1 dropped a message"), std::string::npos)
      << out.status();
  EXPECT_NE(out.status().message().find("max_message_bytes"), std::string::npos) << out.status();
}

TEST_F(ClusterRunTest, ATopologyWithWorkersNeedsAProcessGroup) {
  ASSERT_TRUE(workers_);
  const std::string text = topology_text("sync", 2, true, {{0}}, {workers_->addresses()[0]});
  auto topo = engine::topology::parse_topology_string(text, "<cluster test>", MUFLOW_SOURCE_DIR);
  ASSERT_TRUE(topo.ok()) << topo.status();
  auto server = Server::create(*topo);
  ASSERT_TRUE(server.ok()) << server.status();
  auto out = (*server)->run(requests((*server)->config().vocab_size));
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(out.status())) << out.status();
  EXPECT_NE(out.status().message().find("set_process_group"), std::string::npos) << out.status();
}

}  // namespace
}  // namespace muflow::actors::cluster
