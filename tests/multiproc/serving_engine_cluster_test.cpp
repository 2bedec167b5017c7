// The long-lived engine across processes (#18: `muflow serve` with [[cluster.workers]]):
// requests submitted while earlier ones decode, every device in a loopback worker, give the
// tokens and prompt logits of the same topology in one process, bitwise; the KV cache the
// workers hold is counted; and `kill -9` of a worker while the engine serves loses no
// request: each finishes once, streams exactly its output, and the outputs are the fault-free
// ones; requests submitted after the loss are served by the survivors.

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/cluster/cluster_driver.hpp"
#include "actors/cluster/control_messages.hpp"
#include "actors/cluster/listen_address.hpp"
#include "actors/cluster/worker_launcher.hpp"
#include "actors/server.hpp"
#include "actors/serving_engine.hpp"
#include "engine/topology/topology.hpp"
#include "multiproc/cluster_test_topology.hpp"
#include "transport/cluster/cluster_secret.hpp"

namespace muflow::actors::cluster {
namespace {

using engine::serving::Request;

const char* kServingClusterToken = "serving-engine-cluster-test-token-0123456789";

// What the host saw of one request (its callbacks run on the coordinator's thread, or on
// the engine's recovery thread when a recovery fails).
struct Seen {
  std::mutex mu;
  std::vector<int32_t> streamed;
  int finishes = 0;
  RequestOutput out;
  absl::Status status;
  std::promise<void> done;
};

RequestCallbacks watch(const std::shared_ptr<Seen>& seen) {
  RequestCallbacks cb;
  cb.on_token = [seen](int32_t token) {
    std::lock_guard<std::mutex> lock(seen->mu);
    seen->streamed.push_back(token);
  };
  cb.on_finish = [seen](const RequestOutput& out, const absl::Status& status) {
    std::lock_guard<std::mutex> lock(seen->mu);
    if (++seen->finishes == 1) {
      seen->out = out;
      seen->status = status;
      seen->done.set_value();
    }
  };
  return cb;
}

// The wiring's one-process reference and its 4 devices in two loopback workers (`layout`).
void set_up(const std::string& wiring, const std::vector<std::vector<int>>& layout,
            LoopbackCluster* c) {
  start_loopback_cluster(wiring, layout, "temperature = 0.0\n", kServingClusterToken,
                         kill_test_options(), c);
}

class ServingEngineCluster : public ::testing::TestWithParam<std::string> {};

TEST_P(ServingEngineCluster, RequestsSubmittedWhileServingGiveTheOneProcessOutputs) {
  const std::string wiring = GetParam();
  // Every device in a worker: the driver hosts the coordinator (and collectives) only.
  LoopbackCluster c;
  ASSERT_NO_FATAL_FAILURE(set_up(wiring, {{0, 2}, {1, 3}}, &c));
  const RunOutcome* one = &c.one;
  Server* server = c.server.get();
  auto engine = ServingEngine::start(*server);
  ASSERT_TRUE(engine.ok()) << engine.status();

  // Half the requests first; the rest once the first has streamed a token, so that they
  // join a running engine. Outputs come from drain (no on_finish of their own).
  const std::vector<Request> reqs = requests(server->config().vocab_size);
  auto first = std::make_shared<Seen>();
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (i == reqs.size() / 2) {
      // A request with its own on_finish is handed its output there, not by drain: submit
      // the first one again to watch it (same prompt, next id).
      auto id = (*engine)->submit(reqs[0], watch(first));
      ASSERT_TRUE(id.ok()) << id.status();
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      for (bool streaming = false; !streaming;) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no token came";
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::lock_guard<std::mutex> lock(first->mu);
        streaming = !first->streamed.empty();
      }
      // Every attention stage is in a worker: the KV cache held is theirs. Asserted only where
      // the watched request was still running when the answer came: on a loaded machine this
      // thread can wake after its few tokens are done, and then the cache is rightly empty
      // (the coordinator releases a request's KV in the step that calls its on_finish).
      auto kv = (*engine)->kv_cache_bytes();
      ASSERT_TRUE(kv.ok()) << kv.status();
      bool running = false;
      {
        std::lock_guard<std::mutex> lock(first->mu);
        running = first->finishes == 0;
      }
      if (running) {
        EXPECT_GT(*kv, 0);
      }
    }
    auto id = (*engine)->submit(reqs[i]);
    ASSERT_TRUE(id.ok()) << id.status();
  }
  auto out = (*engine)->drain();
  ASSERT_TRUE(out.ok()) << out.status();
  // Ids: 0..2 the first half, 3 the watched one, 4..6 the rest: compare by prompt order.
  RunOutcome got;
  for (const RequestOutput& o : out->outputs) {
    RequestOutput r = o;
    if (r.request_id > 3) --r.request_id;
    got.outputs.push_back(std::move(r));
  }
  expect_same(*one, got, wiring);
  EXPECT_TRUE(out->recoveries.empty());
  first->done.get_future().wait();
  EXPECT_EQ(first->out.output, one->outputs[0].output);

  auto stats = (*engine)->stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->num_finished, static_cast<int64_t>(reqs.size() + 1));
  EXPECT_EQ(stats->queued_attention_tokens + stats->queued_expert_tokens, 0);
  // The releases of the last requests travel on the data plane, this question on the control
  // plane: wait for them (a leaked cache never reaches 0).
  absl::StatusOr<int64_t> kv = (*engine)->kv_cache_bytes();
  for (const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       kv.ok() && *kv != 0 && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    kv = (*engine)->kv_cache_bytes();
  }
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_EQ(*kv, 0) << "every finished request frees its KV cache in the workers";
  EXPECT_TRUE((*engine)->shutdown().ok());
}

TEST_P(ServingEngineCluster, KillNineWhileServingLosesNoRequestAndGivesTheFaultFreeOutputs) {
  const std::string wiring = GetParam();
  LoopbackCluster c;
  ASSERT_NO_FATAL_FAILURE(set_up(wiring, {{0, 2}, {1, 3}}, &c));
  const RunOutcome* one = &c.one;
  Server* server = c.server.get();
  LaunchedWorkers* workers = c.workers.get();

  // Kill worker 0 once 6 tokens were streamed (requests are then in prefill, in decode and
  // still waiting).
  const pid_t victim = workers->pid(0);
  std::atomic<int64_t> streamed{0};
  RunCallbacks cb;
  cb.on_token = [&](int64_t, int32_t) {
    if (++streamed == 6) {
      ASSERT_EQ(0, ::kill(victim, SIGKILL));
    }
  };
  auto engine = ServingEngine::start(*server, cb);
  ASSERT_TRUE(engine.ok()) << engine.status();

  const std::vector<Request> reqs = requests(server->config().vocab_size);
  std::vector<std::shared_ptr<Seen>> seen;
  for (const Request& r : reqs) {
    seen.push_back(std::make_shared<Seen>());
    auto id = (*engine)->submit(r, watch(seen.back()));
    ASSERT_TRUE(id.ok()) << id.status();
    ASSERT_EQ(*id, r.id);
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_EQ(seen[i]->done.get_future().wait_for(std::chrono::seconds(60)),
              std::future_status::ready)
        << "request " << i << " never finished";
  }
  const int status = workers->reap(0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "wait status " << status;
  RunOutcome got;
  for (size_t i = 0; i < reqs.size(); ++i) {
    Seen& s = *seen[i];
    std::lock_guard<std::mutex> lock(s.mu);
    EXPECT_TRUE(s.status.ok()) << "request " << i << ": " << s.status;
    EXPECT_EQ(s.finishes, 1) << "request " << i;
    EXPECT_EQ(s.streamed, s.out.output) << "request " << i;
    EXPECT_EQ(s.out.prompt, reqs[i].prompt) << "request " << i;
    EXPECT_GE(s.out.first_token_s, s.out.arrival_s) << "request " << i;
    EXPECT_GE(s.out.finish_s, s.out.first_token_s) << "request " << i;
    got.outputs.push_back(s.out);
  }
  expect_same(*one, got, wiring + " after kill -9");

  // The survivors serve what comes next.
  auto after = std::make_shared<Seen>();
  auto id = (*engine)->submit(reqs[1], watch(after));
  ASSERT_TRUE(id.ok()) << id.status();
  auto drained = (*engine)->drain();
  ASSERT_TRUE(drained.ok()) << drained.status();
  after->done.get_future().wait();
  EXPECT_EQ(after->out.output, one->outputs[1].output);
  std::string all_lost;
  for (const RunRecovery& each : drained->recoveries) all_lost += "[" + each.lost + "] ";
  ASSERT_EQ(drained->recoveries.size(), 1u) << all_lost;
  const RunRecovery& r = drained->recoveries[0];
  EXPECT_NE(r.lost.find("process 1"), std::string::npos) << r.lost;
  EXPECT_GE(r.readmitted_requests, 1);
  EXPECT_GE(r.resumed_s, r.detected_s);
  EXPECT_GE(r.first_token_s, r.resumed_s);
  std::printf(
      "[engine fault] %s: detection at %.3f s, resumed %.3f s, first token %.3f s, %d "
      "re-admitted\n",
      wiring.c_str(), r.detected_s, r.resumed_s, r.first_token_s,
      static_cast<int>(r.readmitted_requests));
  auto stats = (*engine)->stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->recoveries.size(), 1u);
  EXPECT_EQ(stats->num_finished, static_cast<int64_t>(reqs.size() + 1));
  int64_t tokens = 0;
  for (const RequestOutput& o : got.outputs) tokens += static_cast<int64_t>(o.output.size());
  tokens += static_cast<int64_t>(after->out.output.size());
  EXPECT_EQ(stats->metrics.num_output_tokens, tokens);
  EXPECT_TRUE((*engine)->shutdown().ok());
}

INSTANTIATE_TEST_SUITE_P(Cluster, ServingEngineCluster,
                         ::testing::Values("sync", "async", "exflow"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// A worker lost while no request runs: the engine re-places its devices at once (no request
// has to fail first), serves the next request on the survivor, and still shuts down. The
// shutdown is watched: it once waited forever for a replaced wiring's actor system (a host
// thread kept that system's CAF logger alive; serving_engine.cpp, HostThreadScope).
TEST(ServingEngineClusterIdle, AWorkerLostWhileIdleIsReplacedAndTheEngineStillShutsDown) {
  LoopbackCluster c;
  ASSERT_NO_FATAL_FAILURE(set_up("sync", {{0, 1}, {2, 3}}, &c));
  const RunOutcome* one = &c.one;
  Server* server = c.server.get();
  LaunchedWorkers* workers = c.workers.get();
  auto engine = ServingEngine::start(*server);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::vector<Request> reqs = requests(server->config().vocab_size);
  auto first = std::make_shared<Seen>();
  ASSERT_TRUE((*engine)->submit(reqs[0], watch(first)).ok());
  ASSERT_EQ(first->done.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);

  ASSERT_EQ(0, ::kill(workers->pid(0), SIGKILL));
  // Watched from another thread: this one asked the first wiring's actors last (start).
  std::thread([e = engine->get()] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (size_t recoveries = 0; recoveries == 0;) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the loss was not recovered from";
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      auto stats = e->stats();
      ASSERT_TRUE(stats.ok()) << stats.status();
      recoveries = stats->recoveries.size();
    }
  }).join();
  auto next = std::make_shared<Seen>();
  ASSERT_TRUE((*engine)->submit(reqs[1], watch(next)).ok());
  ASSERT_EQ(next->done.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_TRUE(next->status.ok()) << next->status;
  EXPECT_EQ(first->out.output, one->outputs[0].output);
  EXPECT_EQ(next->out.output, one->outputs[1].output);

  auto stopped = std::make_shared<std::promise<absl::Status>>();
  std::thread([e = engine->get(), stopped] { stopped->set_value(e->shutdown()); }).detach();
  auto result = stopped->get_future();
  if (result.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    ADD_FAILURE() << "shutdown did not return within 30 s";
    std::_Exit(1);  // the engine cannot be destroyed while its shutdown hangs
  }
  EXPECT_TRUE(result.get().ok());
}

// A worker of the Server's group that died after an earlier run (killed between a batch run
// and the engine's start) is found unreachable while the engine sets its wiring up: it is
// left out (its devices on the survivor), the engine serves with the one-process outputs, and
// that loss is not one of the engine's recoveries.
TEST(ServingEngineClusterSetup, AWorkerLostBeforeTheEngineStartsIsLeftOutAndTheEngineServes) {
  LoopbackCluster c;
  ASSERT_NO_FATAL_FAILURE(set_up("sync", {{0, 2}, {1, 3}}, &c));
  Server* server = c.server.get();
  const std::vector<Request> reqs = requests(server->config().vocab_size);
  auto batch = server->run(reqs);  // both workers join the group
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(0, ::kill(c.workers->pid(0), SIGKILL));
  c.workers->reap(0);

  auto engine = ServingEngine::start(*server);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto seen = std::make_shared<Seen>();
  ASSERT_TRUE((*engine)->submit(reqs[0], watch(seen)).ok());
  ASSERT_EQ(seen->done.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_TRUE(seen->status.ok()) << seen->status;
  EXPECT_EQ(seen->out.output, c.one.outputs[0].output);
  EXPECT_EQ(seen->streamed, c.one.outputs[0].output);
  auto stats = (*engine)->stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_TRUE(stats->recoveries.empty());
  EXPECT_TRUE((*engine)->shutdown().ok());
}

// Waits (at most 60 s) until the engine lists `n` recoveries; returns its stats then.
EngineStats await_recoveries(ServingEngine& engine, size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    auto stats = engine.stats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    if (!stats.ok() || stats->recoveries.size() >= n) return stats.ok() ? *stats : EngineStats{};
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "the engine lists " << stats->recoveries.size() << " recoveries, not " << n;
      return *stats;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The engine of the rejoin tests: sync on two loopback workers ({0, 2} and {1, 3}) whose driver
// tries lost workers again every 100 ms (gtest assertions: call under ASSERT_NO_FATAL_FAILURE).
void start_rejoin_engine(LoopbackCluster* c, std::unique_ptr<ServingEngine>* engine) {
  ClusterDriverOptions options;
  options.rejoin_interval = std::chrono::milliseconds(100);
  ASSERT_NO_FATAL_FAILURE(start_loopback_cluster("sync", {{0, 2}, {1, 3}}, "temperature = 0.0\n",
                                                 kServingClusterToken, options, c));
  auto started = ServingEngine::start(*c->server);
  ASSERT_TRUE(started.ok()) << started.status();
  *engine = std::move(*started);
}

// A worker killed while the engine serves and started again at its address (#18 item 5,
// rejoin) is taken back: the engine replaces its wiring with one that hosts the worker's own
// devices there again, re-admitting what was in flight; requests served before, across and
// after every change give the one-process outputs, each finishing once. The devices'
// processes show the change; and once the other original worker is killed too, its devices
// go to the restarted one (a worker that was not taken back could not take them).
TEST(ServingEngineClusterRejoin, AWorkerRestartedAtItsAddressIsTakenBackWithItsDevices) {
  LoopbackCluster c;
  std::unique_ptr<ServingEngine> engine;
  ASSERT_NO_FATAL_FAILURE(start_rejoin_engine(&c, &engine));
  const std::vector<Request> reqs = requests(c.server->config().vocab_size);
  // Submits every request, waits for each and compares it with the one-process output.
  auto serve_all = [&](const std::string& what) {
    std::vector<std::shared_ptr<Seen>> seen;
    for (const Request& r : reqs) {
      seen.push_back(std::make_shared<Seen>());
      ASSERT_TRUE(engine->submit(r, watch(seen.back())).ok()) << what;
    }
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_EQ(seen[i]->done.get_future().wait_for(std::chrono::seconds(60)),
                std::future_status::ready)
          << what << ": request " << i << " never finished";
      std::lock_guard<std::mutex> lock(seen[i]->mu);
      EXPECT_TRUE(seen[i]->status.ok()) << what << ", request " << i << ": " << seen[i]->status;
      EXPECT_EQ(seen[i]->finishes, 1) << what << ", request " << i;
      EXPECT_EQ(seen[i]->out.output, c.one.outputs[i].output) << what << ", request " << i;
      EXPECT_EQ(seen[i]->streamed, seen[i]->out.output) << what << ", request " << i;
    }
  };
  const std::vector<uint32_t> original = {1, 2, 1, 2};
  {
    auto stats = engine->stats();
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(stats->device_process, original);
  }
  ASSERT_NO_FATAL_FAILURE(serve_all("before the loss"));

  const std::string address = c.workers->addresses()[0];
  ASSERT_EQ(0, ::kill(c.workers->pid(0), SIGKILL));
  c.workers->reap(0);
  EngineStats stats = await_recoveries(*engine, 1);
  ASSERT_EQ(stats.recoveries.size(), 1u);
  EXPECT_EQ(stats.device_process, std::vector<uint32_t>({2, 2, 2, 2}));
  ASSERT_NO_FATAL_FAILURE(serve_all("on the survivor"));

  // Started again at its address while requests are served: they go on across the change. A
  // long request (1,900 tokens, seconds of decode) is surely in flight when the wiring is
  // replaced, so the old wiring's failures are hidden from it and it is re-admitted.
  Request longer = reqs[0];
  longer.max_new_tokens = 1900;
  longer.return_prompt_logits = false;
  const std::vector<Request> longer_reqs = {longer};
  auto longer_want =
      run_text(topology_text("sync", 4, false, {}, {}, "temperature = 0.0\n"), &longer_reqs);
  ASSERT_TRUE(longer_want.ok()) << longer_want.status();
  auto in_flight = std::make_shared<Seen>();
  ASSERT_TRUE(engine->submit(longer, watch(in_flight)).ok());
  // One stage thread, as each of the two first workers has on this machine's 2 cores.
  auto again = LaunchedWorkers::launch(MUFLOW_BINARY, {address},
                                       process_token(kServingClusterToken), {"--threads", "1"});
  ASSERT_TRUE(again.ok()) << again.status();
  for (int round = 0; round < 100; ++round) {
    ASSERT_NO_FATAL_FAILURE(serve_all("while the worker comes back"));
    auto now = engine->stats();
    ASSERT_TRUE(now.ok()) << now.status();
    if (now->recoveries.size() >= 2) break;
  }
  stats = await_recoveries(*engine, 2);
  ASSERT_EQ(stats.recoveries.size(), 2u);
  const RunRecovery back = stats.recoveries[1];  // a copy: `stats` is assigned again below
  EXPECT_TRUE(back.lost.empty()) << back.lost;
  EXPECT_GE(back.readmitted_requests, 1);
  ASSERT_EQ(in_flight->done.get_future().wait_for(std::chrono::seconds(120)),
            std::future_status::ready);
  {
    std::lock_guard<std::mutex> lock(in_flight->mu);
    EXPECT_TRUE(in_flight->status.ok()) << in_flight->status;
    EXPECT_EQ(in_flight->finishes, 1);
    EXPECT_EQ(in_flight->out.output, longer_want->outputs[0].output);
    EXPECT_EQ(in_flight->streamed, in_flight->out.output);
  }
  EXPECT_NE(back.rejoined.find("process 1"), std::string::npos) << back.rejoined;
  EXPECT_GE(back.detected_s, stats.recoveries[0].resumed_s);
  EXPECT_GE(back.resumed_s, back.detected_s);
  EXPECT_EQ(stats.device_process, original) << "the restarted worker hosts its devices again";
  ASSERT_NO_FATAL_FAILURE(serve_all("after the worker was taken back"));

  // The other original worker dies: the restarted one takes every device.
  ASSERT_EQ(0, ::kill(c.workers->pid(1), SIGKILL));
  c.workers->reap(1);
  stats = await_recoveries(*engine, 3);
  ASSERT_EQ(stats.recoveries.size(), 3u);
  EXPECT_NE(stats.recoveries[2].lost.find("process 2"), std::string::npos)
      << stats.recoveries[2].lost;
  EXPECT_EQ(stats.device_process, std::vector<uint32_t>({1, 1, 1, 1}));
  ASSERT_NO_FATAL_FAILURE(serve_all("on the restarted worker alone"));
  std::printf(
      "[engine rejoin] answered at %.3f s, new wiring at %.3f s, first token on it at %.3f s "
      "(%d requests re-admitted)\n",
      back.detected_s, back.resumed_s, back.first_token_s,
      static_cast<int>(back.readmitted_requests));
  EXPECT_TRUE(engine->shutdown().ok());
}

// A process at a lost worker's address that does not prove the cluster secret (another
// token) is not taken back: the engine keeps serving on the survivor, with its devices there.
TEST(ServingEngineClusterRejoin, AProcessWithAnotherTokenAtALostWorkersAddressIsNotTakenBack) {
  LoopbackCluster c;
  std::unique_ptr<ServingEngine> engine;
  ASSERT_NO_FATAL_FAILURE(start_rejoin_engine(&c, &engine));
  const std::string address = c.workers->addresses()[0];
  ASSERT_EQ(0, ::kill(c.workers->pid(0), SIGKILL));
  c.workers->reap(0);
  EngineStats stats = await_recoveries(*engine, 1);
  ASSERT_EQ(stats.recoveries.size(), 1u);
  auto impostor =
      LaunchedWorkers::launch(MUFLOW_BINARY, {address}, "another-cluster-token-0123456789abcdef");
  ASSERT_TRUE(impostor.ok()) << impostor.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // 15 tries
  const std::vector<Request> reqs = requests(c.server->config().vocab_size);
  auto seen = std::make_shared<Seen>();
  ASSERT_TRUE(engine->submit(reqs[2], watch(seen)).ok());
  ASSERT_EQ(seen->done.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_TRUE(seen->status.ok()) << seen->status;
  EXPECT_EQ(seen->out.output, c.one.outputs[2].output);
  auto now = engine->stats();
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(now->recoveries.size(), 1u) << "nothing was taken back";
  EXPECT_EQ(now->device_process, std::vector<uint32_t>({2, 2, 2, 2}));
  EXPECT_TRUE(c.group->returned_workers().empty());
  EXPECT_TRUE(engine->shutdown().ok());
}

// A gate at a lost worker's address that proves the cluster secret but refuses to join (a
// worker that came back misconfigured); counts the joins it is asked for.
// When the gate was asked to join, steady clock; shared with the test thread.
struct Joins {
  std::mutex mu;
  std::vector<std::chrono::steady_clock::time_point> at;
  size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return at.size();
  }
};

// `bogus_proof`: instead a gate that takes any proof and answers one that proves nothing (a
// process that does not know the secret, posing as a worker).
caf::behavior refusing_gate(caf::event_based_actor* self,
                            std::shared_ptr<const transport::cluster::ClusterSecret> secret,
                            std::shared_ptr<Joins> joins, bool bogus_proof) {
  (void)self;
  auto challenge = std::make_shared<transport::cluster::Nonce>();
  return {
      [=](hello_atom) -> std::string {
        *challenge = transport::cluster::make_nonce().value();
        return std::string(challenge->begin(), challenge->end());
      },
      [=](auth_atom, const std::string& proof,
          const std::string& nonce) -> caf::result<std::string> {
        if (bogus_proof) return std::string(32, 'x');
        const auto* p = reinterpret_cast<const uint8_t*>(proof.data());
        if (!secret->verify(*challenge, kConnectorRole, {p, proof.size()}) ||
            nonce.size() != transport::cluster::Nonce{}.size()) {
          return caf::make_error(caf::sec::request_receiver_down, "refused: wrong proof");
        }
        transport::cluster::Nonce theirs{};
        std::copy(nonce.begin(), nonce.end(), theirs.begin());
        const transport::cluster::Proof answer = secret->prove(theirs, kAcceptorRole);
        return std::string(answer.begin(), answer.end());
      },
      [=](join_atom, uint32_t, const std::string&) -> caf::result<std::string> {
        {
          std::lock_guard<std::mutex> lock(joins->mu);
          joins->at.push_back(std::chrono::steady_clock::now());
        }
        return caf::make_error(caf::sec::request_receiver_down, "refused: misconfigured");
      },
  };
}

// An engine on two loopback workers whose worker 0 was killed (and recovered from), and, at that
// worker's address, a gate of this process (`refusing_gate`) instead of a worker.
class GateAtLostAddress : public ::testing::Test {
 protected:
  void start(bool bogus_proof) {
    ASSERT_NO_FATAL_FAILURE(start_rejoin_engine(&c, &engine));
    absl::StatusOr<ListenAddress> address = parse_listen_address(c.workers->addresses()[0]);
    ASSERT_TRUE(address.ok()) << address.status();
    ASSERT_EQ(0, ::kill(c.workers->pid(0), SIGKILL));
    c.workers->reap(0);
    ASSERT_EQ(await_recoveries(*engine, 1).recoveries.size(), 1u);
    auto secret = transport::cluster::ClusterSecret::load("");
    ASSERT_TRUE(secret.ok()) << secret.status();
    cfg.load<caf::io::middleman>();
    sys = std::make_unique<caf::actor_system>(cfg);
    gate = sys->spawn(refusing_gate,
                      std::make_shared<const transport::cluster::ClusterSecret>(*secret), joins,
                      bogus_proof);
    auto port = sys->middleman().publish(gate, address->port, address->host.c_str(), true);
    ASSERT_TRUE(port) << sys->render(port.error());
  }
  void TearDown() override {
    if (engine) {
      EXPECT_TRUE(engine->shutdown().ok());
    }
    if (gate) caf::anon_send_exit(gate, caf::exit_reason::user_shutdown);
  }

  LoopbackCluster c;
  std::unique_ptr<ServingEngine> engine;
  std::shared_ptr<Joins> joins = std::make_shared<Joins>();
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;  // destroyed before the engine
  caf::actor gate;
};

// A worker that comes back but cannot take part (it proves the secret, then refuses to
// join) is lost again at each try, and tried less and less often (the wait doubles): the
// engine goes on serving on the survivor with the one-process outputs, instead of replacing
// its wiring at every try.
TEST_F(GateAtLostAddress, AWorkerThatComesBackButCannotJoinIsTriedLessAndLessOften) {
  ASSERT_NO_FATAL_FAILURE(start(/*bogus_proof=*/false));
  // Five tries: after each failure the wait doubles (0.2, 0.4, 0.8, 1.6 s), on top of the
  // replacement's own time, which is about the same every time; without the back-off the gaps
  // would be about equal (every 0.1 s probe).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (joins->count() < 5 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<double> gaps;
  {
    std::lock_guard<std::mutex> lock(joins->mu);
    ASSERT_GE(joins->at.size(), 5u);
    for (size_t k = 1; k < 5; ++k) {
      gaps.push_back(std::chrono::duration<double>(joins->at[k] - joins->at[k - 1]).count());
    }
  }
  EXPECT_GT(gaps[3] - gaps[2], 0.5) << gaps[2] << " s, then " << gaps[3] << " s";
  EXPECT_GT(gaps[2] - gaps[1], 0.2) << gaps[1] << " s, then " << gaps[2] << " s";
  const size_t tried = joins->count();

  const std::vector<Request> reqs = requests(c.server->config().vocab_size);
  auto seen = std::make_shared<Seen>();
  ASSERT_TRUE(engine->submit(reqs[3], watch(seen)).ok());
  ASSERT_EQ(seen->done.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_TRUE(seen->status.ok()) << seen->status;
  EXPECT_EQ(seen->out.output, c.one.outputs[3].output);
  auto stats = engine->stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->device_process, std::vector<uint32_t>({2, 2, 2, 2}));
  // One record per try that was lost again (a later try may have come meanwhile).
  EXPECT_GE(stats->recoveries.size(), 1 + tried);
  EXPECT_LE(stats->recoveries.size(), 1 + joins->count());
  for (size_t i = 1; i < stats->recoveries.size(); ++i) {
    EXPECT_NE(stats->recoveries[i].rejoined.find("process 1"), std::string::npos) << i;
    EXPECT_NE(stats->recoveries[i].lost.find("process 1"), std::string::npos) << i;
  }
}

// A process at a lost worker's address that takes the driver's proof but cannot prove the
// secret itself is not taken back (the driver checks the gate's answer): the engine keeps its
// wiring on the survivor, and the process is never asked to join.
TEST_F(GateAtLostAddress, AGateThatCannotProveTheSecretIsNotTakenBack) {
  ASSERT_NO_FATAL_FAILURE(start(/*bogus_proof=*/true));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // ~15 tries
  EXPECT_EQ(joins->count(), 0u);
  EXPECT_TRUE(c.group->returned_workers().empty());
  auto stats = engine->stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->recoveries.size(), 1u);
  EXPECT_EQ(stats->device_process, std::vector<uint32_t>({2, 2, 2, 2}));
}

TEST(ServingEngineClusterSetup, ATopologyWithWorkersButNoProcessGroupIsRefused) {
  const std::string text = topology_text("sync", 2, false, {{1}}, {"127.0.0.1:7199"});
  auto topo = engine::topology::parse_topology_string(text, "<engine test>", MUFLOW_SOURCE_DIR);
  ASSERT_TRUE(topo.ok()) << topo.status();
  auto server = Server::create(*topo);
  ASSERT_TRUE(server.ok()) << server.status();
  auto engine = ServingEngine::start(**server);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(engine.status().message().find("set_process_group"), std::string::npos)
      << engine.status();
}

}  // namespace
}  // namespace muflow::actors::cluster
