// OpenAiServer in process, on a synthetic model without a tokenizer: token-id prompts get the
// engine's tokens, text prompts a clear 400, a second server cannot take a bound port, a stop
// while a stream runs ends it with an error event, and /metrics carries every family.
#include "http/server/openai_server.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/small_topology.hpp"

namespace muflow::http {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

struct Running {
  std::unique_ptr<actors::Server> server;
  std::unique_ptr<actors::ServingEngine> engine;
  std::unique_ptr<OpenAiServer> http;
  std::thread listener;

  explicit Running(ServeOptions options = {},
                   engine::topology::Topology t = testing_fixtures::small_topology(2)) {
    auto s = actors::Server::create(t);
    EXPECT_TRUE(s.ok()) << s.status();
    server = std::move(*s);
    auto e = actors::ServingEngine::start(*server);
    EXPECT_TRUE(e.ok()) << e.status();
    engine = std::move(*e);
    options.port = 0;
    http = std::make_unique<OpenAiServer>(*server, *engine, server->tokenizer(), options);
    EXPECT_TRUE(http->bind().ok());
    listener = std::thread([this] { http->serve(); });
  }
  ~Running() {
    http->stop(0);
    listener.join();
    (void)engine->shutdown();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", http->port());
    c.set_read_timeout(std::chrono::seconds(30));
    return c;
  }
};

TEST(OpenAiServer, TokenIdPromptsMatchTheEngineAndTextNeedsATokenizer) {
  Running r;
  ASSERT_EQ(r.server->tokenizer(), nullptr);
  auto res =
      r.client().Post("/v1/completions", R"({"prompt":[5,6,7,8],"max_tokens":6,"temperature":0})",
                      "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json body = json::parse(res->body);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 6);
  EXPECT_EQ(body["usage"]["prompt_tokens"], 4);
  // The same prompt straight through the engine.
  engine::serving::Request direct;
  direct.prompt = {5, 6, 7, 8};
  direct.max_new_tokens = 6;
  ASSERT_TRUE(r.engine->submit(direct).ok());
  auto drained = r.engine->drain();
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_EQ(body["choices"][0]["token_ids"].get<std::vector<int32_t>>(),
            drained->outputs.back().output);

  res = r.client().Post("/v1/completions", R"({"prompt":"hello"})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_THAT(res->body, HasSubstr("no tokenizer"));
  // A token id outside the vocabulary (97) is the engine's 400.
  res = r.client().Post("/v1/completions", R"({"prompt":[1,500]})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_THAT(res->body, HasSubstr("outside the vocabulary"));
}

TEST(OpenAiServer, ABoundPortIsNotShared) {
  Running r;
  engine::topology::Topology t = testing_fixtures::small_topology(1);
  auto server = actors::Server::create(t);
  ASSERT_TRUE(server.ok());
  auto engine = actors::ServingEngine::start(**server);
  ASSERT_TRUE(engine.ok());
  ServeOptions options;
  options.port = r.http->port();
  OpenAiServer second(**server, **engine, nullptr, options);
  const absl::Status bound = second.bind();
  EXPECT_EQ(bound.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(bound.message(), HasSubstr(std::to_string(r.http->port())));
}

TEST(OpenAiServer, StopCancelsARunningStreamWithAnErrorEvent) {
  Running r;
  std::string received;
  std::atomic<bool> streaming{false};  // a first token event arrived
  std::thread reader([&] {
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = R"({"prompt":[5,6],"max_tokens":3000,"stream":true,"ignore_eos":true})";
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
      received.append(data, len);
      if (received.find("data: ") != std::string::npos) streaming.store(true);
      return true;
    };
    httplib::Response res;
    httplib::Error error;
    httplib::Client c = r.client();
    c.send(req, res, error);
  });
  // Stop while the 3000-token stream runs: right after its first event (bounded wait).
  for (int i = 0; i < 2000 && !streaming.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(streaming.load()) << "no token event within 10 s";  // (the reader is joined below)
  r.http->stop(0);                                                // no grace: cancel now
  reader.join();
  EXPECT_THAT(received, HasSubstr("\"shutting_down\""))
      << received.substr(received.size() > 600 ? received.size() - 600 : 0);
  EXPECT_THAT(received, HasSubstr("data: [DONE]"));
  EXPECT_EQ(r.http->in_flight(), 0);
  // After stop, generation requests are refused (the listener is closed).
  auto res = r.client().Post("/v1/completions", R"({"prompt":[5]})", "application/json");
  EXPECT_FALSE(res && res->status == 200);
  // The engine freed the cancelled request's KV cache.
  auto kv = r.engine->kv_cache_bytes();
  ASSERT_TRUE(kv.ok());
  for (int i = 0; i < 200 && *kv != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    kv = r.engine->kv_cache_bytes();
  }
  EXPECT_EQ(*kv, 0);
}

TEST(OpenAiServer, MetricsHaveEveryFamily) {
  Running r;
  auto res = r.client().Post("/v1/completions", R"({"prompt":[5,6,7],"max_tokens":4})",
                             "application/json");
  ASSERT_TRUE(res && res->status == 200);
  res = r.client().Get("/metrics");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  for (const char* family :
       {"muflow:num_requests_running", "muflow:num_requests_waiting", "muflow:prompt_tokens_total",
        "muflow:generation_tokens_total", "muflow:request_success_total",
        "muflow:requests_rejected_total", "muflow:time_to_first_token_seconds",
        "muflow:inter_token_latency_seconds", "muflow:e2e_request_latency_seconds",
        "muflow:device_busy_ratio", "muflow:moe_expert_tokens_total", "muflow:moe_balance",
        "muflow:mu_queue_tokens", "muflow:all_to_all_seconds_total", "muflow:kv_cache_bytes",
        "muflow:worker_recoveries_total", "muflow:worker_rejoins_total"}) {
    EXPECT_THAT(res->body, HasSubstr(std::string("# TYPE ") + family)) << family;
  }
  EXPECT_THAT(res->body, HasSubstr("muflow:generation_tokens_total{model_name=\"muflow\"} 4\n"));
  EXPECT_THAT(res->body, HasSubstr("muflow:prompt_tokens_total{model_name=\"muflow\"} 3\n"));
  EXPECT_THAT(res->body, HasSubstr("muflow:worker_recoveries_total{model_name=\"muflow\"} 0\n"));
  EXPECT_THAT(res->body, HasSubstr("muflow:worker_rejoins_total{model_name=\"muflow\"} 0\n"));
}

// The engine's own admission limit (`[scheduler] max_queued_requests`): a request it refuses
// gets 429 with code queue_full (streaming: 200, an error event, [DONE]) and counts in
// requests_rejected_total{reason="queue_full"}, not as a finished (aborted) request.
TEST(OpenAiServer, ARequestTheEngineQueueRefusesIsCountedAsRejected) {
  engine::topology::Topology t = testing_fixtures::small_topology(2);
  t.scheduler.max_batch_requests = 1;
  t.scheduler.max_queued_requests = 1;
  Running r({}, t);
  constexpr int kRequests = 8;  // each to its max_tokens (ignore_eos: a sampled EOS ends none)
  std::vector<int> status(kRequests, 0);
  std::vector<std::string> body(kRequests);
  // Sends kRequests copies of `request` at once; each answer's status and body (0 and empty
  // when none came).
  const auto send_all = [&](const std::string& request) {
    std::vector<std::thread> senders;
    for (int i = 0; i < kRequests; ++i) {
      status[i] = 0;
      body[i].clear();
      senders.emplace_back([&, i] {
        auto res = r.client().Post("/v1/completions", request, "application/json");
        if (res) {
          status[i] = res->status;
          body[i] = res->body;
        }
      });
    }
    for (std::thread& s : senders) s.join();
  };
  send_all(R"({"prompt":[5,6,7],"max_tokens":32,"ignore_eos":true})");
  int ok = 0, rejected = 0;
  for (int i = 0; i < kRequests; ++i) {
    if (status[i] == 200) ++ok;
    if (status[i] == 429) {
      ++rejected;
      EXPECT_THAT(body[i], HasSubstr("queue_full")) << body[i];
    }
  }
  EXPECT_EQ(ok + rejected, kRequests);
  EXPECT_GE(ok, 1);
  // 8 requests at once, one running and one waiting at a time: the rest are refused (a
  // request takes 32 decode steps, far longer than the 8 take to arrive).
  ASSERT_GE(rejected, 1);
  auto res = r.client().Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_THAT(
      res->body,
      HasSubstr("muflow:requests_rejected_total{model_name=\"muflow\",reason=\"queue_full\"} " +
                std::to_string(rejected) + "\n"));
  EXPECT_THAT(res->body, HasSubstr("muflow:request_success_total{model_name=\"muflow\","
                                   "finished_reason=\"abort\"} 0\n"));
  EXPECT_THAT(res->body, HasSubstr("muflow:request_success_total{model_name=\"muflow\","
                                   "finished_reason=\"length\"} " +
                                   std::to_string(ok) + "\n"));

  // The same when streaming: the refusal comes as HTTP 200 and an error event with the code,
  // then [DONE]; it counts as rejected too (the stream's own end path).
  send_all(R"({"prompt":[5,6,7],"max_tokens":32,"ignore_eos":true,"stream":true})");
  int streamed = 0, refused_streams = 0;
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_EQ(status[i], 200) << body[i];
    EXPECT_THAT(body[i], HasSubstr("data: [DONE]\n\n")) << body[i];
    if (body[i].find("queue_full") != std::string::npos) {
      ++refused_streams;
    } else {
      ++streamed;
    }
  }
  EXPECT_GE(streamed, 1);
  ASSERT_GE(refused_streams, 1);
  res = r.client().Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_THAT(
      res->body,
      HasSubstr("muflow:requests_rejected_total{model_name=\"muflow\",reason=\"queue_full\"} " +
                std::to_string(rejected + refused_streams) + "\n"));
  EXPECT_THAT(res->body, HasSubstr("muflow:request_success_total{model_name=\"muflow\","
                                   "finished_reason=\"abort\"} 0\n"));
  EXPECT_THAT(res->body, HasSubstr("muflow:request_success_total{model_name=\"muflow\","
                                   "finished_reason=\"length\"} " +
                                   std::to_string(ok + streamed) + "\n"));
}

}  // namespace
}  // namespace muflow::http
