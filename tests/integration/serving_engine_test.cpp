// The long-lived engine (actors/serving_engine.hpp): requests submitted from several host
// threads while earlier ones decode, some cancelled mid-stream. Every request that is not
// cancelled gets exactly the single-device reference's tokens; a cancelled one streamed a
// prefix of them and its KV cache is freed; the engine ends with no KV cache held.
#include "actors/serving_engine.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/exec/reference_decoder.hpp"
#include "small_topology.hpp"

namespace muflow {
namespace {

using engine::serving::Request;
using engine::topology::Topology;
using ::testing::HasSubstr;

Topology small_topology(const std::string& wiring) {
  Topology t = testing_fixtures::small_topology(4);
  t.wiring = wiring;
  t.model.seed = 23;
  t.scheduler.max_prefill_tokens = 6;
  return t;
}

Request prompt_of(int thread, int k, int64_t max_new) {
  Request r;
  r.max_new_tokens = max_new;
  const int len = 3 + (thread * 5 + k * 3) % 9;
  for (int j = 0; j < len; ++j) r.prompt.push_back(3 + (thread * 31 + k * 17 + j * 7) % 90);
  return r;
}

// What one submitted request saw, filled by its callbacks (coordinator thread).
struct Seen {
  std::mutex mutex;
  std::vector<int32_t> streamed;
  std::promise<std::pair<actors::RequestOutput, absl::Status>> finished;
  std::promise<void> two_tokens;
  bool two_tokens_set = false;
};

actors::RequestCallbacks watch(const std::shared_ptr<Seen>& seen) {
  actors::RequestCallbacks cb;
  cb.on_token = [seen](int32_t token) {
    std::lock_guard<std::mutex> lock(seen->mutex);
    seen->streamed.push_back(token);
    if (seen->streamed.size() == 2 && !seen->two_tokens_set) {
      seen->two_tokens_set = true;
      seen->two_tokens.set_value();
    }
  };
  cb.on_finish = [seen](const actors::RequestOutput& out, const absl::Status& status) {
    seen->finished.set_value({out, status});
  };
  return cb;
}

void serve_from_four_threads(const std::string& wiring) {
  SCOPED_TRACE(wiring);
  absl::StatusOr<std::unique_ptr<actors::Server>> server =
      actors::Server::create(small_topology(wiring));
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::unique_ptr<actors::ServingEngine>> engine =
      actors::ServingEngine::start(**server);
  ASSERT_TRUE(engine.ok()) << engine.status();

  constexpr int kThreads = 4, kPerThread = 3;
  constexpr int64_t kMaxNew = 48;
  struct Submitted {
    int64_t id = -1;
    Request request;
    std::shared_ptr<Seen> seen;
    bool cancel = false;
  };
  std::vector<std::vector<Submitted>> per_thread(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kPerThread; ++k) {
        Submitted s;
        s.request = prompt_of(t, k, kMaxNew);
        s.seen = std::make_shared<Seen>();
        s.cancel = k == 1;  // the second request of every thread is cancelled mid-stream
        absl::StatusOr<int64_t> id = (*engine)->submit(s.request, watch(s.seen));
        if (!id.ok()) {
          ++errors;
          return;
        }
        s.id = *id;
        s.request.id = *id;
        // Wait until it decodes, so the next submission joins a running engine.
        s.seen->two_tokens.get_future().wait();
        if (s.cancel) (*engine)->cancel(s.id);
        per_thread[t].push_back(std::move(s));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  ASSERT_EQ(errors.load(), 0);

  int cancelled = 0;
  for (const auto& list : per_thread) {
    for (const Submitted& s : list) {
      auto [out, status] = s.seen->finished.get_future().get();
      ASSERT_TRUE(status.ok()) << status;
      absl::StatusOr<engine::exec::ReferenceResult> ref = engine::exec::reference_generate(
          *(*server)->model(), s.request, (*server)->topology().sampling, false);
      ASSERT_TRUE(ref.ok()) << ref.status();
      EXPECT_EQ(out.request_id, s.id);
      EXPECT_EQ(out.prompt, s.request.prompt);
      if (!s.cancel) {
        EXPECT_FALSE(out.cancelled);
        EXPECT_EQ(out.output, ref->output_ids) << "request " << s.id;
        continue;
      }
      // Cancelled after two tokens: a prefix of the reference, and (unless it finished
      // before the cancel arrived) flagged and shorter.
      ASSERT_LE(out.output.size(), ref->output_ids.size());
      EXPECT_GE(out.output.size(), 2u);
      EXPECT_TRUE(std::equal(out.output.begin(), out.output.end(), ref->output_ids.begin()))
          << "request " << s.id;
      if (out.cancelled) {
        ++cancelled;
        EXPECT_LT(out.output.size(), static_cast<size_t>(kMaxNew));
      }
      std::lock_guard<std::mutex> lock(s.seen->mutex);
      EXPECT_EQ(s.seen->streamed, out.output);  // nothing streamed after the cancel
    }
  }
  EXPECT_GT(cancelled, 0) << "no cancel arrived before its request finished";

  absl::StatusOr<actors::RunOutcome> drained = (*engine)->drain();
  ASSERT_TRUE(drained.ok()) << drained.status();
  // Every request went to its own on_finish, so the engine holds none of them any more.
  EXPECT_TRUE(drained->outputs.empty());
  EXPECT_EQ(drained->metrics.num_requests, kThreads * kPerThread);
  EXPECT_EQ(drained->metrics.num_completed_requests, kThreads * kPerThread - cancelled);
  absl::StatusOr<int64_t> kv = (*engine)->kv_cache_bytes();
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_EQ(*kv, 0) << "every finished or cancelled request's KV cache is freed";

  // The engine keeps serving after a drain.
  Request late = prompt_of(7, 7, 5);
  auto seen = std::make_shared<Seen>();
  absl::StatusOr<int64_t> id = (*engine)->submit(late, watch(seen));
  ASSERT_TRUE(id.ok()) << id.status();
  late.id = *id;
  auto [out, status] = seen->finished.get_future().get();
  ASSERT_TRUE(status.ok()) << status;
  absl::StatusOr<engine::exec::ReferenceResult> ref = engine::exec::reference_generate(
      *(*server)->model(), late, (*server)->topology().sampling, false);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(out.output, ref->output_ids);
  EXPECT_TRUE((*engine)->shutdown().ok());
}

TEST(ServingEngine, SyncSubmitFromFourThreadsAndCancelMidStream) {
  serve_from_four_threads("sync");
}

TEST(ServingEngine, AsyncSubmitFromFourThreadsAndCancelMidStream) {
  serve_from_four_threads("async");
}

TEST(ServingEngine, RefusesBadRequestsAndWorkAfterShutdown) {
  absl::StatusOr<std::unique_ptr<actors::Server>> server =
      actors::Server::create(small_topology("sync"));
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::unique_ptr<actors::ServingEngine>> engine =
      actors::ServingEngine::start(**server);
  ASSERT_TRUE(engine.ok()) << engine.status();
  Request empty;
  empty.max_new_tokens = 3;
  absl::StatusOr<int64_t> id = (*engine)->submit(empty);
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(id.status().message(), HasSubstr("empty prompt"));
  Request outside = prompt_of(0, 0, 3);
  outside.prompt[0] = 97;
  EXPECT_THAT((*engine)->submit(outside).status().message(), HasSubstr("outside the vocabulary"));
  // A refused request takes no id: the next one is 0.
  absl::StatusOr<int64_t> first = (*engine)->submit(prompt_of(0, 0, 3));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, 0);
  (*engine)->cancel(12345);  // unknown: ignored
  absl::StatusOr<actors::RunOutcome> drained = (*engine)->drain();
  ASSERT_TRUE(drained.ok()) << drained.status();
  ASSERT_EQ(drained->outputs.size(), 1u);
  EXPECT_EQ(drained->outputs[0].output.size(), 3u);
  ASSERT_TRUE((*engine)->shutdown().ok());
  EXPECT_EQ((*engine)->submit(prompt_of(0, 1, 3)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*engine)->drain().status().code(), absl::StatusCode::kFailedPrecondition);
}

// A long-lived engine forgets a request whose output it handed to the request's own on_finish
// (no memory per finished request); an output nobody received waits for drain.
TEST(ServingEngine, DeliveredOutputsAreNotKept) {
  absl::StatusOr<std::unique_ptr<actors::Server>> server =
      actors::Server::create(small_topology("sync"));
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::unique_ptr<actors::ServingEngine>> engine =
      actors::ServingEngine::start(**server);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto seen = std::make_shared<Seen>();
  absl::StatusOr<int64_t> delivered = (*engine)->submit(prompt_of(1, 0, 4), watch(seen));
  ASSERT_TRUE(delivered.ok()) << delivered.status();
  absl::StatusOr<int64_t> kept = (*engine)->submit(prompt_of(2, 0, 4));
  ASSERT_TRUE(kept.ok()) << kept.status();
  auto [out, status] = seen->finished.get_future().get();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(out.output.size(), 4u);
  absl::StatusOr<actors::RunOutcome> drained = (*engine)->drain();
  ASSERT_TRUE(drained.ok()) << drained.status();
  ASSERT_EQ(drained->outputs.size(), 1u);
  EXPECT_EQ(drained->outputs[0].request_id, *kept);
  EXPECT_EQ(drained->outputs[0].output.size(), 4u);
  EXPECT_EQ(drained->metrics.num_completed_requests, 2);
}

TEST(ServingEngine, SimNeedsTheBatchRun) {
  Topology t = small_topology("sync");
  t.backend = "sim";
  for (auto& d : t.devices) d.kind = "A100-80GB";
  absl::StatusOr<std::unique_ptr<actors::Server>> server = actors::Server::create(t);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::unique_ptr<actors::ServingEngine>> engine =
      actors::ServingEngine::start(**server);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(engine.status().message(), HasSubstr("use Server::run"));
}

}  // namespace
}  // namespace muflow

namespace muflow {
namespace {

// Per-request sampling: a request's own temperature / top-p / seed / stop-at-EOS override the
// topology's, each request sampled as the single-device reference samples with the same
// spec; an explicit seed (key_by_request = false) reproduces whatever id the request got.
TEST(ServingEngine, PerRequestSamplingMatchesTheReferenceAndSeedsReproduce) {
  Topology t = small_topology("sync");
  t.sampling.temperature = 0.0;  // the topology is greedy; requests override it
  absl::StatusOr<std::unique_ptr<actors::Server>> server = actors::Server::create(t);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::unique_ptr<actors::ServingEngine>> engine =
      actors::ServingEngine::start(**server);
  ASSERT_TRUE(engine.ok()) << engine.status();

  engine::topology::SamplingSpec hot;
  hot.temperature = 1.3;
  hot.top_p = 0.95;
  hot.seed = 99;
  hot.key_by_request = false;
  hot.stop_at_eos = false;
  std::vector<std::shared_ptr<Seen>> seen;
  for (int i = 0; i < 3; ++i) {
    Request r = prompt_of(1, 2, 12);
    if (i < 2) r.sampling = hot;  // 0 and 1: the same seeded request; 2: greedy
    seen.push_back(std::make_shared<Seen>());
    ASSERT_TRUE((*engine)->submit(r, watch(seen.back())).ok());
  }
  std::vector<actors::RequestOutput> outs;
  for (auto& s : seen) {
    auto [out, status] = s->finished.get_future().get();
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(out.finish_reason, out.output.size() == 12u ? actors::FinishReason::kLength
                                                          : actors::FinishReason::kEos);
    outs.push_back(out);
  }
  EXPECT_EQ(outs[0].output, outs[1].output);  // same seed, different ids
  EXPECT_EQ(outs[0].output.size(), 12u);      // stop_at_eos off: full length
  auto reference = [&](const engine::topology::SamplingSpec& spec, int64_t id) {
    Request r = prompt_of(1, 2, 12);
    r.id = id;
    return engine::exec::reference_generate(*(*server)->model(), r, spec, false);
  };
  absl::StatusOr<engine::exec::ReferenceResult> hot_ref = reference(hot, 0);
  ASSERT_TRUE(hot_ref.ok()) << hot_ref.status();
  EXPECT_EQ(outs[0].output, hot_ref->output_ids);
  absl::StatusOr<engine::exec::ReferenceResult> greedy_ref = reference(t.sampling, 2);
  ASSERT_TRUE(greedy_ref.ok()) << greedy_ref.status();
  EXPECT_EQ(outs[2].output, greedy_ref->output_ids);
  EXPECT_NE(outs[0].output, outs[2].output);

  // A bad override is refused at submit.
  Request bad = prompt_of(0, 0, 2);
  bad.sampling = hot;
  bad.sampling->top_p = 0.0;
  EXPECT_THAT((*engine)->submit(bad).status().message(), HasSubstr("top_p"));

  // The live stats: nothing waiting or running now, three finished, expert tokens counted.
  absl::StatusOr<actors::EngineStats> stats = (*engine)->stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->num_waiting, 0);
  EXPECT_EQ(stats->num_running, 0);
  EXPECT_EQ(stats->num_finished, 3);
  EXPECT_EQ(stats->queued_attention_tokens + stats->queued_expert_tokens +
                stats->queued_sampler_tokens,
            0);
  int64_t expert_tokens = 0;
  for (const auto& block : stats->moe_tokens) {
    for (int64_t n : block) expert_tokens += n;
  }
  EXPECT_GT(expert_tokens, 0);
  EXPECT_EQ(static_cast<int64_t>(stats->metrics.device_busy_pct.size()),
            static_cast<int64_t>(t.devices.size()));
}

}  // namespace
}  // namespace muflow
