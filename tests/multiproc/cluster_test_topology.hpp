#pragma once
/// \file
/// What the multi-process tests share (#18): topologies of every wiring with their devices in
/// loopback workers, a request mix that exercises chunked prefill, decode and prompt logits,
/// a run of such a topology (with the cluster driver when it lists workers), and a bitwise
/// comparison of two runs' outputs.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/cluster/cluster_driver.hpp"
#include "actors/cluster/worker_launcher.hpp"
#include "actors/server.hpp"
#include "engine/serving/request.hpp"
#include "engine/serving/sampling.hpp"
#include "engine/topology/topology.hpp"

namespace muflow::actors::cluster {

// The model half of a topology: the shipped KJV model, or a synthetic Qwen2-MoE.
inline std::string model_table(bool qwen) {
  if (!qwen) {
    return absl::StrCat("[model]\npath = \"", MUFLOW_SOURCE_DIR,
                        "/models/kjv-mixtral-tiny-bf16\"\n");
  }
  return "[model]\ntype = \"qwen2_moe\"\nvocab = 512\nhidden = 64\nlayers = 2\nheads = 4\n"
         "kv_heads = 2\nexperts = 6\ntopk = 2\nffn = 48\nshared_ffn = 80\nseed = 5\n";
}

// A topology of `wiring` on `num_devices` cpu devices; `workers[i]` lists the devices of
// worker i (none: one process). `sampling`: the [sampling] table's keys (default greedy).
inline std::string topology_text(const std::string& wiring, int num_devices, bool qwen,
                                 const std::vector<std::vector<int>>& workers,
                                 const std::vector<std::string>& addresses,
                                 const std::string& sampling = "temperature = 0.0\n") {
  std::string t = absl::StrCat("wiring = \"", wiring, "\"\nbackend = \"cpu\"\n\n[cluster]\n",
                               "num_devices = ", num_devices, "\nthreads_per_device = 1\n");
  for (size_t i = 0; i < workers.size(); ++i) {
    absl::StrAppend(&t, "\n[[cluster.workers]]\naddress = \"", addresses[i], "\"\ndevices = [",
                    absl::StrJoin(workers[i], ", "), "]\n");
  }
  absl::StrAppend(&t, "\n", model_table(qwen), "\n[placement]\n");
  if (wiring == "async" || wiring == "async-replicated") {
    absl::StrAppend(&t, "attention_devices = 1\n");
  }
  if (wiring == "async-replicated") absl::StrAppend(&t, "replica_experts = [0, 3]\n");
  absl::StrAppend(&t,
                  "\n[scheduler]\nmax_batch_requests = 3\nmax_prefill_tokens = 7\n"
                  "max_batch_tokens = 16\n\n[sampling]\nstop_at_eos = false\n",
                  sampling);
  return t;
}

// Concurrent requests of mixed lengths (chunked prefill, decode and prefill mixed), with
// prompt logits, so that the comparison is bitwise and not only of tokens.
inline std::vector<engine::serving::Request> requests(int64_t vocab) {
  std::vector<engine::serving::Request> out;
  for (int i = 0; i < 6; ++i) {
    engine::serving::Request r;
    r.id = i;
    r.max_new_tokens = 4 + i % 4;
    r.return_prompt_logits = true;
    const int len = 3 + (i * 5) % 11;
    r.prompt.push_back(1);
    for (int j = 1; j < len; ++j) {
      r.prompt.push_back(
          static_cast<int32_t>(3 + engine::serving::counter_uniform(7, i, j) * (vocab - 3)));
    }
    out.push_back(std::move(r));
  }
  return out;
}

// Runs the topology `text` on `reqs` (nullptr: `requests(vocab)`), behind a cluster driver
// with `options` when it lists workers: the run's outcome, or the first error (parse, driver,
// server, run).
inline absl::StatusOr<RunOutcome> run_text(const std::string& text,
                                           const std::vector<engine::serving::Request>* reqs,
                                           const ClusterDriverOptions& options = {}) {
  auto topo = engine::topology::parse_topology_string(text, "<cluster test>", MUFLOW_SOURCE_DIR);
  if (!topo.ok()) return topo.status();
  auto server = Server::create(*topo);
  if (!server.ok()) return server.status();
  if (!topo->workers.empty()) {
    auto group = make_cluster_driver(*topo, options);
    if (!group.ok()) return group.status();
    (*server)->set_process_group(std::move(*group));
  }
  return (*server)->run(reqs ? *reqs : requests((*server)->config().vocab_size));
}

inline void expect_same(const RunOutcome& want, const RunOutcome& got, const std::string& what) {
  ASSERT_EQ(want.outputs.size(), got.outputs.size()) << what;
  for (size_t i = 0; i < want.outputs.size(); ++i) {
    EXPECT_EQ(want.outputs[i].output, got.outputs[i].output) << what << ", request " << i;
    const auto& a = want.outputs[i].prompt_logits;
    const auto& b = got.outputs[i].prompt_logits;
    ASSERT_EQ(a.size(), b.size()) << what << ", request " << i;
    ASSERT_FALSE(a.empty()) << what;
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
        << what << ", request " << i << ": prompt logits not bitwise equal";
  }
}

// Driver options for the kill -9 tests: CAF's monitor and the data plane's endpoint notice a
// dead process at once, so these tests do not exercise the heartbeat (worker_fault_test's
// SIGSTOP test does). With the default 1.5 s timeout, a live survivor starved of CPU for that
// long (a parallel ctest on 2 cores runs other multi-process tests beside it) was counted
// lost too: a second recovery the test did not cause.
inline ClusterDriverOptions kill_test_options() {
  ClusterDriverOptions options;
  options.heartbeat_timeout = std::chrono::seconds(10);
  return options;
}

// A wiring's one-process reference outputs, and the same 4-device topology with its devices
// in loopback workers (`layout`: each worker's devices; one `muflow worker` process each,
// started with `token`) behind a Server whose cluster driver has `options`.
struct LoopbackCluster {
  RunOutcome one;
  std::unique_ptr<LaunchedWorkers> workers;
  std::optional<engine::topology::Topology> topo;
  std::unique_ptr<Server> server;
  std::shared_ptr<ProcessGroup> group;
};

// The cluster token of this test process for a test file's `base` token: `base` and the pid.
// ctest runs each test in a process of its own, two at once; a driver that probes a lost
// worker's address would take back another test's worker that bound the freed port if both
// knew one token.
inline std::string process_token(const char* base) {
  return absl::StrCat(base, "-pid", static_cast<int64_t>(::getpid()));
}

// Fills `c` (gtest assertions: call under ASSERT_NO_FATAL_FAILURE); the workers and this
// process's driver share process_token(base_token).
inline void start_loopback_cluster(const std::string& wiring,
                                   const std::vector<std::vector<int>>& layout,
                                   const std::string& sampling, const char* base_token,
                                   const ClusterDriverOptions& options, LoopbackCluster* c) {
  auto one = run_text(topology_text(wiring, 4, false, {}, {}, sampling), nullptr);
  ASSERT_TRUE(one.ok()) << one.status();
  c->one = std::move(*one);
  const std::string token = process_token(base_token);
  ::setenv("MUFLOW_CLUSTER_TOKEN", token.c_str(), 1);
  std::vector<std::string> listen(layout.size(), "127.0.0.1:0");
  auto workers = LaunchedWorkers::launch(MUFLOW_BINARY, listen, token);
  ASSERT_TRUE(workers.ok()) << workers.status();
  c->workers = std::move(*workers);
  const std::string text =
      topology_text(wiring, 4, false, layout, c->workers->addresses(), sampling);
  auto topo =
      engine::topology::parse_topology_string(text, "<loopback cluster>", MUFLOW_SOURCE_DIR);
  ASSERT_TRUE(topo.ok()) << topo.status();
  c->topo = std::move(*topo);
  auto server = Server::create(*c->topo);
  ASSERT_TRUE(server.ok()) << server.status();
  c->server = std::move(*server);
  auto group = make_cluster_driver(*c->topo, options);
  ASSERT_TRUE(group.ok()) << group.status();
  c->group = *group;
  c->server->set_process_group(c->group);
}

}  // namespace muflow::actors::cluster
