// A worker killed during a run (#18 item 5 and its "must show"): `kill -9` of a `muflow
// worker` process while requests decode loses no request, every request streams and finishes
// exactly once, and tokens and prompt logits are bitwise those of the same topology in one
// process — for every wiring, greedy and with seeded sampling, with the lost devices moved to
// the surviving worker or spread over several survivors. A later run on the same Server starts
// on the survivors directly.
//
// The time from the kill to the first token after recovery is printed, not asserted (a speed
// target lives in a benchmark: bench/README.md, "Surviving a dead worker").

#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "actors/cluster/cluster_driver.hpp"
#include "actors/cluster/cluster_layout.hpp"
#include "actors/cluster/worker_launcher.hpp"
#include "actors/server.hpp"
#include "engine/topology/topology.hpp"
#include "multiproc/cluster_test_topology.hpp"

namespace muflow::actors::cluster {
namespace {

const char* kFaultToken = "worker-fault-test-token-0123456789abcdef";

struct FaultCase {
  std::string wiring;
  bool sampled;  // seeded temperature sampling instead of greedy
  // Devices per worker; worker 0 is killed. The driver keeps the devices no worker lists.
  std::vector<std::vector<int>> layout;
};

std::string case_name(const FaultCase& c) {
  std::string name =
      absl::StrCat(c.wiring, c.sampled ? "_sampled" : "_greedy", "_", c.layout.size(), "workers");
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  return name;
}

class WorkerFault : public ::testing::TestWithParam<FaultCase> {};

TEST_P(WorkerFault, KillNineDuringDecodeLosesNoRequestAndGivesTheFaultFreeOutputs) {
  const FaultCase& c = GetParam();
  const std::string sampling = c.sampled ? "temperature = 0.9\nseed = 17\n" : "temperature = 0.0\n";
  LoopbackCluster cluster;
  ASSERT_NO_FATAL_FAILURE(start_loopback_cluster(c.wiring, c.layout, sampling, kFaultToken,
                                                 kill_test_options(), &cluster));

  // Kill worker 0 once 6 tokens were streamed (requests are then in prefill, in decode and
  // still waiting); stream every token and every finish as the host sees them.
  using Clock = std::chrono::steady_clock;
  const pid_t victim = cluster.workers->pid(0);
  int64_t streamed = 0;
  Clock::time_point killed{};
  std::map<int64_t, std::vector<int32_t>> stream;
  std::map<int64_t, int> finishes;
  RunCallbacks cb;
  cb.on_token = [&](int64_t id, int32_t token) {
    stream[id].push_back(token);
    if (++streamed == 6) {
      ASSERT_EQ(0, ::kill(victim, SIGKILL));
      killed = Clock::now();
    }
  };
  cb.on_finish = [&](const RequestOutput& out) { ++finishes[out.request_id]; };
  const auto reqs = requests(cluster.server->config().vocab_size);
  auto out = cluster.server->run(reqs, cb);
  ASSERT_TRUE(out.ok()) << out.status();
  const int status = cluster.workers->reap(0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "wait status " << status;

  expect_same(cluster.one, *out, case_name(c));
  ASSERT_EQ(out->recoveries.size(), 1u);
  const RunRecovery& r = out->recoveries[0];
  EXPECT_NE(r.lost.find("process 1"), std::string::npos) << r.lost;
  EXPECT_GE(r.readmitted_requests, 1);
  EXPECT_GE(r.resumed_s, r.detected_s);
  EXPECT_GE(r.first_token_s, r.resumed_s);
  for (const RequestOutput& o : out->outputs) {
    EXPECT_EQ(finishes[o.request_id], 1) << "request " << o.request_id;
    EXPECT_EQ(stream[o.request_id], o.output) << "request " << o.request_id;
    EXPECT_EQ(o.prompt, reqs[static_cast<size_t>(o.request_id)].prompt);
    EXPECT_GE(o.first_token_s, o.arrival_s);
    EXPECT_GE(o.finish_s, o.first_token_s);
  }
  int64_t total = 0;
  for (const RequestOutput& o : out->outputs) total += static_cast<int64_t>(o.output.size());
  EXPECT_EQ(out->metrics.num_output_tokens, total);
  EXPECT_EQ(out->metrics.num_completed_requests, static_cast<int64_t>(reqs.size()));
  // Kill to detection on the steady clock; detection to the first token on the run's clock.
  const std::vector<ProcessGroup::LostWorker> lost = cluster.group->lost_workers();
  ASSERT_EQ(lost.size(), 1u);
  const double detect_ms =
      std::chrono::duration<double, std::milli>(lost[0].detected - killed).count();
  std::printf(
      "[fault] %s: kill -9 to detection %.1f ms, to the first token after recovery "
      "%.1f ms (%d requests re-admitted)\n",
      case_name(c).c_str(), detect_ms, detect_ms + 1e3 * (r.first_token_s - r.detected_s),
      static_cast<int>(r.readmitted_requests));

  // The next run starts on the survivors (the group remembers the lost worker).
  auto again = cluster.server->run(reqs);
  ASSERT_TRUE(again.ok()) << again.status();
  expect_same(cluster.one, *again, case_name(c) + ", the run after");
  EXPECT_TRUE(again->recoveries.empty());
}

INSTANTIATE_TEST_SUITE_P(Cluster, WorkerFault,
                         ::testing::Values(FaultCase{"sync", false, {{0, 2}, {1, 3}}},
                                           FaultCase{"async", false, {{0, 2}, {1, 3}}},
                                           FaultCase{"harmoeny", false, {{0, 2}, {1, 3}}},
                                           FaultCase{"moeshard", false, {{0, 2}, {1, 3}}},
                                           FaultCase{"exflow", false, {{0, 2}, {1, 3}}},
                                           FaultCase{"async-replicated", false, {{0, 2}, {1, 3}}},
                                           FaultCase{"sync", true, {{0, 2}, {1, 3}}},
                                           FaultCase{"sync", false, {{1}, {0}, {2}}},
                                           FaultCase{"exflow", true, {{1}, {0}, {2}}}),
                         [](const ::testing::TestParamInfo<FaultCase>& info) {
                           return case_name(info.param);
                         });

// A worker that hangs instead of dying (SIGSTOP: its process and its connections stay, so
// CAF's monitor sees nothing) is noticed by the driver's heartbeat and recovered from like a
// dead one: no request lost, the fault-free outputs. Detection takes at least the heartbeat
// timeout less one interval (the last answer may just precede the stop).
TEST(WorkerHang, SigStopDuringDecodeIsNoticedByTheHeartbeatAndGivesTheFaultFreeOutputs) {
  ClusterDriverOptions options;
  options.heartbeat_interval = std::chrono::milliseconds(50);
  options.heartbeat_timeout = std::chrono::milliseconds(1000);
  LoopbackCluster c;
  ASSERT_NO_FATAL_FAILURE(start_loopback_cluster("sync", {{0, 2}, {1, 3}}, "temperature = 0.0\n",
                                                 kFaultToken, options, &c));

  using Clock = std::chrono::steady_clock;
  const pid_t victim = c.workers->pid(0);
  int64_t streamed = 0;
  Clock::time_point stopped{};
  std::map<int64_t, std::vector<int32_t>> stream;
  RunCallbacks cb;
  // Without a working heartbeat nothing would notice the stop and the run would wait
  // forever: a watchdog then kills the worker (CAF's monitor sees that), so that the test
  // fails on the loss's description instead of hanging.
  std::thread watchdog;
  cb.on_token = [&](int64_t id, int32_t token) {
    stream[id].push_back(token);
    if (++streamed == 6) {
      ASSERT_EQ(0, ::kill(victim, SIGSTOP));
      stopped = Clock::now();
      watchdog = std::thread([g = c.group, victim] {
        const auto deadline = Clock::now() + std::chrono::seconds(15);
        while (g->lost_workers().empty() && Clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        if (g->lost_workers().empty()) ::kill(victim, SIGKILL);
      });
    }
  };
  const auto reqs = requests(c.server->config().vocab_size);
  auto out = c.server->run(reqs, cb);
  if (watchdog.joinable()) watchdog.join();
  ::kill(victim, SIGKILL);  // a stopped process still takes SIGKILL
  c.workers->reap(0);
  ASSERT_TRUE(out.ok()) << out.status();

  expect_same(c.one, *out, "sync, a hung worker");
  ASSERT_EQ(out->recoveries.size(), 1u);
  EXPECT_NE(out->recoveries[0].lost.find("no answer to a heartbeat"), std::string::npos)
      << out->recoveries[0].lost;
  for (const RequestOutput& o : out->outputs) {
    EXPECT_EQ(stream[o.request_id], o.output) << "request " << o.request_id;
  }
  const std::vector<ProcessGroup::LostWorker> lost = c.group->lost_workers();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].process, 1u);
  const double detect_ms =
      std::chrono::duration<double, std::milli>(lost[0].detected - stopped).count();
  // The oldest unanswered ping was sent at most one interval before the stop; detection
  // waits the timeout from it, then at most an interval more (plus a loaded machine's delays).
  EXPECT_GE(detect_ms, 1000.0 - 50.0);
  EXPECT_LT(detect_ms, 5000.0);
  std::printf("[hang] SIGSTOP to detection %.1f ms (heartbeat every 50 ms, timeout 1000 ms)\n",
              detect_ms);
}

// A worker that served one run and is gone before the next (killed between two runs of one
// Server) is counted lost when the next run cannot reach it: that run goes on without it, on
// the survivor, with the same outputs. A worker never reached is a configuration error.
TEST(WorkerLostBetweenRuns, TheNextRunGoesOnWithoutItAndAWorkerNeverReachedFailsTheRun) {
  ClusterDriverOptions options;
  options.join_timeout = std::chrono::milliseconds(3000);
  LoopbackCluster c;
  ASSERT_NO_FATAL_FAILURE(start_loopback_cluster("sync", {{0, 2}, {1, 3}}, "temperature = 0.0\n",
                                                 kFaultToken, options, &c));
  const auto reqs = requests(c.server->config().vocab_size);

  auto first = c.server->run(reqs);
  ASSERT_TRUE(first.ok()) << first.status();
  expect_same(c.one, *first, "the first run");
  ASSERT_EQ(0, ::kill(c.workers->pid(0), SIGKILL));
  c.workers->reap(0);

  auto second = c.server->run(reqs);
  ASSERT_TRUE(second.ok()) << second.status();
  expect_same(c.one, *second, "the run after the kill");
  const std::vector<ProcessGroup::LostWorker> lost = c.group->lost_workers();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].process, 1u);
  EXPECT_NE(lost[0].description.find("cannot be reached again"), std::string::npos)
      << lost[0].description;

  // A fresh group whose first worker was never reached: the run fails and names it.
  auto fresh_group = make_cluster_driver(*c.topo, options);
  ASSERT_TRUE(fresh_group.ok()) << fresh_group.status();
  c.server->set_process_group(*fresh_group);
  auto refused = c.server->run(reqs);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(c.workers->addresses()[0]), std::string::npos)
      << refused.status();
  EXPECT_TRUE((*fresh_group)->lost_workers().empty());
}

TEST(ReplaceLostDevices, MovesOnlyTheLostDevicesToTheLeastLoadedSurvivors) {
  // Process 1 hosts devices 0 and 2; 2 and 3 host one each; the driver hosts device 4.
  const std::vector<uint32_t> before = {1, 2, 1, 3, 0};
  EXPECT_EQ(replace_lost_devices(before, {1}, 4), (std::vector<uint32_t>{2, 2, 3, 3, 0}));
  EXPECT_EQ(replace_lost_devices(before, {2}, 4), (std::vector<uint32_t>{1, 3, 1, 3, 0}));
  EXPECT_EQ(replace_lost_devices(before, {1, 2, 3}, 4), (std::vector<uint32_t>{0, 0, 0, 0, 0}));
  EXPECT_EQ(replace_lost_devices(before, {}, 4), before);
}

TEST(DeviceMap, RoundTripsAndRejectsWhatIsNotAMap) {
  const std::vector<uint32_t> map = {1, 2, 1, 0};
  EXPECT_EQ(format_device_processes(map), "1,2,1,0");
  auto back = parse_device_processes("1,2,1,0", 4, 3);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, map);
  EXPECT_FALSE(parse_device_processes("1,2,1", 4, 3).ok());      // too few
  EXPECT_FALSE(parse_device_processes("1,2,1,0,0", 4, 3).ok());  // too many
  EXPECT_FALSE(parse_device_processes("1,3,1,0", 4, 3).ok());    // no process 3
  EXPECT_FALSE(parse_device_processes("1,x,1,0", 4, 3).ok());
  EXPECT_FALSE(parse_device_processes("", 1, 3).ok());
  auto too_big = parse_device_processes("1,-1,1,0", 4, 3);
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("entry 1"), std::string::npos) << too_big.status();
}

}  // namespace
}  // namespace muflow::actors::cluster
