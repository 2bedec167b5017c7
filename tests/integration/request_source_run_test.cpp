// Server::run over a request source (#15, bounded memory under overload): requests are made as
// they arrive, outputs equal those of the same requests given as a list, a run that keeps no
// outputs holds a bounded number of requests however many are offered, and a request that
// fails its checks when taken fails the run there, after the ones before it were reported.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "actors/server.hpp"
#include "engine/serving/request_source.hpp"
#include "small_topology.hpp"

namespace muflow {
namespace {

using engine::serving::Request;

engine::topology::Topology poisson_topology(const std::string& backend, int64_t num_requests,
                                            double rate_per_s) {
  engine::topology::Topology t = testing_fixtures::small_topology(2);
  t.backend = backend;
  if (backend == "sim") {
    for (auto& d : t.devices) d.kind = "A100-80GB";
  }
  t.workload.kind = "poisson";
  t.workload.num_requests = num_requests;
  t.workload.rate_per_s = rate_per_s;
  t.workload.input_min = 4;
  t.workload.input_max = 12;
  t.workload.output_min = 2;
  t.workload.output_max = 6;
  t.workload.seed = 5;
  return t;
}

std::vector<actors::RequestOutput> by_id(std::vector<actors::RequestOutput> outputs) {
  std::sort(outputs.begin(), outputs.end(),
            [](const auto& a, const auto& b) { return a.request_id < b.request_id; });
  return outputs;
}

// The same workload as a list and as a source: the same tokens (cpu, real math), and a run
// that keeps no outputs reports every one to on_finish and holds none at the end.
TEST(RequestSourceRun, SameTokensAsTheListAndKeepsNoneWhenAsked) {
  auto server = actors::Server::create(poisson_topology("cpu", 24, 400.0));
  ASSERT_TRUE(server.ok()) << server.status();
  auto list = (*server)->make_workload();
  ASSERT_TRUE(list.ok()) << list.status();
  auto from_list = (*server)->run(*list);
  ASSERT_TRUE(from_list.ok()) << from_list.status();
  ASSERT_EQ(from_list->outputs.size(), 24u);

  auto source = (*server)->make_workload_source();
  ASSERT_TRUE(source.ok()) << source.status();
  std::vector<actors::RequestOutput> seen;  // the coordinator calls one at a time
  actors::RunCallbacks cb;
  cb.keep_outputs = false;
  cb.on_finish = [&](const actors::RequestOutput& r) { seen.push_back(r); };
  auto from_source = (*server)->run(*source, cb);
  ASSERT_TRUE(from_source.ok()) << from_source.status();
  EXPECT_TRUE(from_source->outputs.empty());
  seen = by_id(std::move(seen));
  ASSERT_EQ(seen.size(), 24u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].request_id, static_cast<int64_t>(i));
    EXPECT_EQ(seen[i].prompt, from_list->outputs[i].prompt) << i;
    EXPECT_EQ(seen[i].output, from_list->outputs[i].output) << i;
    EXPECT_EQ(seen[i].finish_reason, actors::FinishReason::kLength) << i;
  }
  EXPECT_EQ(from_source->metrics.num_completed_requests, 24);
}

// Far above capacity with a queue limit: what the coordinator holds at once does not grow
// with the requests offered (4x more offered, the same bound), and every offered request has
// an outcome. Sim backend: virtual time, deterministic.
TEST(RequestSourceRun, RequestsHeldStayBoundedUnderOverload) {
  for (int64_t offered : {2000, 8000}) {
    engine::topology::Topology t = poisson_topology("sim", offered, 1e5);
    t.scheduler.max_batch_requests = 16;
    t.scheduler.max_queued_requests = 32;
    auto server = actors::Server::create(t);
    ASSERT_TRUE(server.ok()) << server.status();
    auto source = (*server)->make_workload_source();
    ASSERT_TRUE(source.ok()) << source.status();
    int64_t completed = 0, rejected = 0;
    actors::RunCallbacks cb;
    cb.keep_outputs = false;
    cb.on_finish = [&](const actors::RequestOutput& r) {
      (r.finish_reason == actors::FinishReason::kRejected ? rejected : completed) += 1;
    };
    auto out = (*server)->run(*source, cb);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(completed + rejected, offered);
    EXPECT_GT(rejected, offered / 2) << "the load is far above capacity";
    EXPECT_EQ(out->metrics.num_rejected_requests, rejected);
    // Queue limit + running (2 ranks x 16) + the arrivals of one engine step (taken before
    // the excess is rejected), whatever was offered: 87 and 89 here.
    EXPECT_LE(out->peak_requests_held, 2 * (32 + 2 * 16)) << offered;
  }
  // A list run holds every request: the source is what bounds it.
  engine::topology::Topology t = poisson_topology("sim", 2000, 1e5);
  t.scheduler.max_queued_requests = 32;
  auto server = actors::Server::create(t);
  ASSERT_TRUE(server.ok()) << server.status();
  auto list = (*server)->make_workload();
  ASSERT_TRUE(list.ok()) << list.status();
  auto out = (*server)->run(*list);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->peak_requests_held, 2000);
}

// A request that fails its checks when taken fails the run with its id; the requests that
// finished before were reported to on_finish.
TEST(RequestSourceRun, BadRequestFailsTheRunWhereItArrives) {
  engine::topology::Topology t = poisson_topology("sim", 1, 1.0);
  auto server = actors::Server::create(t);
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<Request> requests;
  for (int64_t i = 0; i < 5; ++i) {
    Request r;
    r.id = i;
    r.prompt = {5, 6, 7};
    r.max_new_tokens = i == 3 ? 0 : 2;  // request 3 is invalid
    r.arrival_s = i < 2 ? 0.0 : 10.0 * static_cast<double>(i);
    requests.push_back(r);
  }
  std::vector<int64_t> finished;
  actors::RunCallbacks cb;
  cb.keep_outputs = false;
  cb.on_finish = [&](const actors::RequestOutput& r) { finished.push_back(r.request_id); };
  auto out = (*server)->run(engine::serving::make_vector_source(requests), cb);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("request 3: max_new_tokens must be >= 1"),
            std::string::npos)
      << out.status();
  std::sort(finished.begin(), finished.end());
  // 0 and 1 (t = 0) finished long before request 2 arrived (t = 20 s) and 3 was taken.
  EXPECT_EQ(finished, (std::vector<int64_t>{0, 1}));
  // The same list through run(list) is refused before anything runs.
  auto refused = (*server)->run(requests);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("request 3"), std::string::npos);
}

}  // namespace
}  // namespace muflow
