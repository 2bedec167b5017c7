// The public embedding API (include/muflow/, libmuflow.so) on the model shipped in models/:
// greedy output equals `muflow generate`'s for the same prompt, streamed pieces add up to the
// completion's text, requests from two threads all finish with their solo outputs, cancel
// stops a request and frees its KV cache, shutdown ends running requests exactly once, and
// bad input (topology path, TOML, parameters, prompts) gives a clear error, never a crash.
// Uses only <muflow/muflow.hpp> (plus nlohmann::json to read the CLI's output).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <memory>
#include <muflow/muflow.hpp>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "scoped_env.hpp"
#include "worker_process.hpp"

namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

const std::string kSource = MUFLOW_SOURCE_DIR;
const std::string kTopology = kSource + "/topologies/sync-kjv-bf16-2cpu.toml";
const std::string kModel = kSource + "/models/kjv-mixtral-tiny-bf16";

// Everything one request's callbacks saw (on_token / on_finish run on the engine thread).
struct Watch {
  std::mutex mutex;
  std::vector<muflow::TokenId> streamed;
  std::string pieces;
  int num_finish = 0;
  std::promise<muflow::Completion> finished;
  std::promise<void> first_tokens;  // set once `notify_after` tokens streamed
  size_t notify_after = 2;
};

muflow::StreamCallbacks watch(const std::shared_ptr<Watch>& w) {
  muflow::StreamCallbacks cb;
  cb.on_token = [w](muflow::RequestId, muflow::TokenId token, std::string_view piece) {
    std::lock_guard<std::mutex> lock(w->mutex);
    w->streamed.push_back(token);
    w->pieces += piece;
    if (w->streamed.size() == w->notify_after) w->first_tokens.set_value();
  };
  cb.on_finish = [w](const muflow::Completion& c) {
    std::lock_guard<std::mutex> lock(w->mutex);
    if (++w->num_finish == 1) w->finished.set_value(c);
  };
  return cb;
}

// Waits (bounded, so a bug fails instead of hanging) for the request's on_finish.
muflow::Completion finished(const std::shared_ptr<Watch>& w) {
  std::future<muflow::Completion> f = w->finished.get_future();
  if (f.wait_for(120s) != std::future_status::ready) {
    ADD_FAILURE() << "on_finish was not called within 120 s";
    return {};
  }
  return f.get();
}

std::unique_ptr<muflow::Engine> open_or_die(const std::string& topology) {
  muflow::Result<std::unique_ptr<muflow::Engine>> engine = muflow::Engine::open(topology);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

// A file path of its own for this test and process (ctest runs tests in parallel, and other
// build trees may run this test at the same time).
std::string temp_path(const std::string& stem) {
  return ::testing::TempDir() + "api_test_" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
         std::to_string(::getpid()) + "_" + stem + ".toml";
}

// The shipped topology with `stop_at_eos = false` and an absolute model path, written to a
// temporary folder (so requests run to max_tokens: long enough to cancel or shut down).
std::string write_no_eos_topology() {
  const std::string path = temp_path("no_eos");
  std::ofstream f(path);
  f << "wiring = \"sync\"\nbackend = \"cpu\"\n[cluster]\nnum_devices = 2\n"
    << "[model]\npath = \"" << kModel << "\"\n"
    << "[sampling]\ntemperature = 0.0\nstop_at_eos = false\n";
  return path;
}

// `muflow generate --json` (the CLI, through the internal Server API) for a text prompt.
nlohmann::json cli_generate(const std::string& prompt, int64_t max_new_tokens) {
  const std::string cmd = std::string(MUFLOW_BINARY) + " generate --model '" + kModel +
                          "' --prompt '" + prompt + "' --max-new-tokens " +
                          std::to_string(max_new_tokens) + " --json";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return {};
  std::string out;
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  if (pclose(pipe) != 0) return {};
  return nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
}

TEST(ApiTest, GreedyOutputEqualsMuflowGenerate) {
  std::unique_ptr<muflow::Engine> engine = open_or_die(kTopology);
  ASSERT_TRUE(engine);
  const muflow::EngineInfo& info = engine->info();
  EXPECT_EQ(info.wiring, "sync");
  EXPECT_EQ(info.num_devices, 2);
  EXPECT_EQ(info.vocab_size, 4096);
  EXPECT_TRUE(info.has_tokenizer);

  const std::string prompt = "And God said, Let there be";
  constexpr int64_t kMax = 20;
  auto w = std::make_shared<Watch>();
  muflow::Result<muflow::RequestId> id = engine->submit(prompt, {kMax}, watch(w));
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  const muflow::Completion c = finished(w);
  muflow::Result<muflow::Metrics> metrics = engine->wait();
  ASSERT_TRUE(metrics.ok()) << metrics.status().to_string();

  const nlohmann::json ref = cli_generate(prompt, kMax);
  ASSERT_TRUE(ref.is_object()) << "muflow generate failed";
  EXPECT_EQ(c.id, *id);
  EXPECT_TRUE(c.status.ok()) << c.status.to_string();
  EXPECT_EQ(c.prompt_tokens, ref["prompt_ids"].get<std::vector<int32_t>>());
  EXPECT_EQ(c.tokens, ref["output_ids"].get<std::vector<int32_t>>());
  EXPECT_EQ(c.reason,
            c.tokens.size() < kMax ? muflow::FinishReason::kStop : muflow::FinishReason::kLength);
  EXPECT_EQ(w->streamed, c.tokens);
  EXPECT_EQ(w->pieces, c.text);
  // The CLI decodes the output alone, without the word space that continues the prompt.
  const std::string cli_text = ref["text"].get<std::string>();
  ASSERT_FALSE(c.text.empty());
  EXPECT_EQ(c.text[0] == ' ' ? c.text.substr(1) : c.text, cli_text);
  EXPECT_GE(c.time_to_first_token_ms, 0.0);
  EXPECT_GE(c.latency_ms, c.time_to_first_token_ms);
  EXPECT_EQ(w->num_finish, 1);

  // tokenize / detokenize agree with what the engine used.
  muflow::Result<std::vector<muflow::TokenId>> ids = engine->tokenize(prompt);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, c.prompt_tokens);
  EXPECT_EQ(ids->front(), info.bos_id);
  muflow::Result<std::string> text = engine->detokenize(c.tokens);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, cli_text);

  EXPECT_EQ(metrics->num_requests, 1);
  EXPECT_EQ(metrics->num_completed_requests, 1);
  EXPECT_EQ(metrics->num_output_tokens, static_cast<int64_t>(c.tokens.size()));
  EXPECT_EQ(metrics->ttft.num_samples, 1);
  EXPECT_EQ(metrics->device_busy_pct.size(), 2u);
  EXPECT_TRUE(engine->shutdown().ok());
}

TEST(ApiTest, TwoThreadsSubmitConcurrentlyAndAllFinishWithTheirSoloOutputs) {
  std::unique_ptr<muflow::Engine> engine = open_or_die(kTopology);
  ASSERT_TRUE(engine);
  const std::vector<std::vector<std::string>> prompts = {
      {"In the beginning God created", "The LORD is my shepherd;", "And it came to pass"},
      {"For God so loved the world", "Blessed are the meek:", "Thou shalt not"}};
  struct Sent {
    std::string prompt;
    int64_t max_tokens = 0;
    muflow::RequestId id = -1;
    std::shared_ptr<Watch> watch;
  };
  std::vector<std::vector<Sent>> sent(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (size_t k = 0; k < prompts[t].size(); ++k) {
        Sent s{prompts[t][k], static_cast<int64_t>(8 + 5 * k + t), -1, std::make_shared<Watch>()};
        muflow::Result<muflow::RequestId> id =
            engine->submit(s.prompt, {s.max_tokens}, watch(s.watch));
        if (id.ok()) s.id = *id;
        sent[t].push_back(std::move(s));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  muflow::Result<muflow::Metrics> metrics = engine->wait();
  ASSERT_TRUE(metrics.ok()) << metrics.status().to_string();
  EXPECT_EQ(metrics->num_requests, 6);
  EXPECT_EQ(metrics->num_completed_requests, 6);

  std::vector<bool> seen_id(6, false);
  for (const auto& list : sent) {
    for (const Sent& s : list) {
      ASSERT_GE(s.id, 0);
      ASSERT_LT(s.id, 6);
      EXPECT_FALSE(seen_id[s.id]) << "id " << s.id << " given twice";
      seen_id[s.id] = true;
      const muflow::Completion c = finished(s.watch);
      EXPECT_EQ(c.id, s.id);
      EXPECT_TRUE(c.reason == muflow::FinishReason::kStop ||
                  c.reason == muflow::FinishReason::kLength);
      EXPECT_EQ(s.watch->num_finish, 1);
      EXPECT_EQ(s.watch->streamed, c.tokens);
      EXPECT_EQ(s.watch->pieces, c.text);
      // Batch invariance: the same tokens as the prompt served alone.
      auto solo = std::make_shared<Watch>();
      ASSERT_TRUE(engine->submit(s.prompt, {s.max_tokens}, watch(solo)).ok());
      EXPECT_EQ(finished(solo).tokens, c.tokens) << s.prompt;
    }
  }
}

TEST(ApiTest, CancelStopsARequestAndFreesItsKvCache) {
  std::unique_ptr<muflow::Engine> engine = open_or_die(write_no_eos_topology());
  ASSERT_TRUE(engine);
  constexpr int64_t kMax = 1500;
  auto w = std::make_shared<Watch>();
  muflow::Result<muflow::RequestId> id = engine->submit("And the earth was", {kMax}, watch(w));
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  ASSERT_EQ(w->first_tokens.get_future().wait_for(120s), std::future_status::ready);
  engine->cancel(*id);
  const muflow::Completion c = finished(w);
  EXPECT_EQ(c.reason, muflow::FinishReason::kCancelled);
  EXPECT_TRUE(c.status.ok());
  EXPECT_GE(c.tokens.size(), 2u);
  EXPECT_LT(c.tokens.size(), static_cast<size_t>(kMax));
  EXPECT_EQ(w->streamed, c.tokens);
  ASSERT_TRUE(engine->wait().ok());
  muflow::Result<int64_t> kv = engine->kv_cache_bytes();
  ASSERT_TRUE(kv.ok()) << kv.status().to_string();
  EXPECT_EQ(*kv, 0);
  engine->cancel(*id);     // finished: ignored
  engine->cancel(123456);  // unknown: ignored

  // What it streamed is the start of the uncancelled output.
  auto again = std::make_shared<Watch>();
  ASSERT_TRUE(
      engine->submit("And the earth was", {static_cast<int64_t>(c.tokens.size())}, watch(again))
          .ok());
  const muflow::Completion full = finished(again);
  EXPECT_EQ(full.reason, muflow::FinishReason::kLength);
  EXPECT_EQ(full.tokens, c.tokens);
}

TEST(ApiTest, ShutdownEndsRunningRequestsOnceAndRefusesMoreWork) {
  std::unique_ptr<muflow::Engine> engine = open_or_die(write_no_eos_topology());
  ASSERT_TRUE(engine);
  auto w = std::make_shared<Watch>();
  ASSERT_TRUE(engine->submit_tokens({1, 300, 400}, {1500}, watch(w)).ok());
  ASSERT_EQ(w->first_tokens.get_future().wait_for(120s), std::future_status::ready);
  EXPECT_TRUE(engine->shutdown().ok());
  const muflow::Completion c = finished(w);
  EXPECT_EQ(c.reason, muflow::FinishReason::kShutdown);
  EXPECT_EQ(c.status.code(), muflow::ErrorCode::kFailedPrecondition);
  EXPECT_GE(c.tokens.size(), 2u);
  EXPECT_EQ(w->num_finish, 1);

  muflow::Result<muflow::RequestId> late = engine->submit_tokens({1, 300}, {4});
  EXPECT_EQ(late.status().code(), muflow::ErrorCode::kFailedPrecondition);
  EXPECT_EQ(engine->wait().status().code(), muflow::ErrorCode::kFailedPrecondition);
  EXPECT_EQ(engine->kv_cache_bytes().status().code(), muflow::ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(engine->shutdown().ok());  // idempotent
  engine.reset();                        // no second on_finish
  EXPECT_EQ(w->num_finish, 1);
}

TEST(ApiTest, ThrowingCallbackFailsTheEngineWithAClearError) {
  std::unique_ptr<muflow::Engine> engine = open_or_die(kTopology);
  ASSERT_TRUE(engine);
  auto w = std::make_shared<Watch>();
  muflow::StreamCallbacks cb = watch(w);
  cb.on_token = [](muflow::RequestId, muflow::TokenId, std::string_view) {
    throw std::runtime_error("host callback failed");
  };
  ASSERT_TRUE(engine->submit("The LORD is", {8}, cb).ok());
  muflow::Result<muflow::Metrics> metrics = engine->wait();
  ASSERT_FALSE(metrics.ok());
  EXPECT_EQ(metrics.status().code(), muflow::ErrorCode::kInternal);
  EXPECT_THAT(metrics.status().message(), HasSubstr("host callback failed"));
  const muflow::Completion c = finished(w);
  EXPECT_EQ(c.reason, muflow::FinishReason::kError);
  EXPECT_THAT(c.status.message(), HasSubstr("host callback failed"));
  // The failed engine ends later requests at once, with the same error.
  auto late = std::make_shared<Watch>();
  muflow::Result<muflow::RequestId> id = engine->submit("The LORD is", {8}, watch(late));
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  const muflow::Completion refused = finished(late);
  EXPECT_EQ(refused.id, *id);
  EXPECT_EQ(refused.reason, muflow::FinishReason::kError);
  EXPECT_THAT(refused.status.message(), HasSubstr("host callback failed"));
  EXPECT_TRUE(refused.tokens.empty());
  EXPECT_TRUE(engine->shutdown().ok());
}

TEST(ApiTest, CallbackThrowingANonStdExceptionFailsTheEngineWithAClearError) {
  std::unique_ptr<muflow::Engine> engine = open_or_die(kTopology);
  ASSERT_TRUE(engine);
  muflow::StreamCallbacks cb;
  cb.on_finish = [](const muflow::Completion&) { throw 42; };
  ASSERT_TRUE(engine->submit("The LORD is", {4}, cb).ok());
  muflow::Result<muflow::Metrics> metrics = engine->wait();
  ASSERT_FALSE(metrics.ok());
  EXPECT_EQ(metrics.status().code(), muflow::ErrorCode::kInternal);
  EXPECT_THAT(metrics.status().message(), HasSubstr("not derived from std::exception"));
}

TEST(ApiTest, BadTopologiesGiveClearErrors) {
  muflow::Result<std::unique_ptr<muflow::Engine>> missing =
      muflow::Engine::open("/nonexistent/dir/topology.toml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), muflow::ErrorCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/dir/topology.toml"));
  EXPECT_THROW((void)missing.value(), std::logic_error);

  EXPECT_EQ(muflow::Engine::open("").status().code(), muflow::ErrorCode::kInvalidArgument);

  const std::string typo = temp_path("typo");
  std::ofstream(typo) << "wiring = \"sync\"\n[model]\nhiden = 128\n";
  muflow::Result<std::unique_ptr<muflow::Engine>> bad = muflow::Engine::open(typo);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), muflow::ErrorCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("_typo.toml:3"));
  EXPECT_THAT(bad.status().message(), HasSubstr("model.hiden"));

  const std::string no_model = temp_path("no_model");
  std::ofstream(no_model) << "[model]\npath = \"does-not-exist\"\n";
  EXPECT_EQ(muflow::Engine::open(no_model).status().code(), muflow::ErrorCode::kNotFound);

  // The sim backend runs in virtual time: no live engine.
  const std::string sim = temp_path("sim");
  std::ofstream(sim) << "backend = \"sim\"\n[cluster]\nnum_devices = 2\nkind = \"H100-SXM\"\n";
  muflow::Result<std::unique_ptr<muflow::Engine>> sim_engine = muflow::Engine::open(sim);
  ASSERT_FALSE(sim_engine.ok());
  EXPECT_EQ(sim_engine.status().code(), muflow::ErrorCode::kFailedPrecondition);
  EXPECT_THAT(sim_engine.status().message(), HasSubstr("sim"));

  // Worker addresses with port 0 (for `muflow run --spawn-workers`, which starts them; the
  // library starts no process): refused before the model loads, naming the file and entry.
  const std::string workers = kSource + "/topologies/sync-kjv-2workers.toml";
  muflow::Result<std::unique_ptr<muflow::Engine>> with_workers = muflow::Engine::open(workers);
  ASSERT_FALSE(with_workers.ok());
  EXPECT_EQ(with_workers.status().code(), muflow::ErrorCode::kInvalidArgument);
  EXPECT_THAT(with_workers.status().message(), HasSubstr("sync-kjv-2workers.toml"));
  EXPECT_THAT(with_workers.status().message(), HasSubstr("[[cluster.workers]] 0"));
  EXPECT_THAT(with_workers.status().message(), HasSubstr("port 0"));
}

// A topology with `[[cluster.workers]]` runs those devices in the worker processes: the engine
// drives them (as `muflow serve` does) and gives the tokens the same topology gives in one
// process.
TEST(ApiTest, ATopologyWithAWorkerProcessGivesTheOneProcessTokens) {
  const std::string token = "api-test-cluster-token-pid" + std::to_string(::getpid());
  muflow::testing::WorkerProcess worker({"--listen", "127.0.0.1:0", "--threads", "1"}, token);
  const uint16_t port = worker.port();
  ASSERT_NE(port, 0) << "the worker did not start:\n" << worker.log();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  const muflow::testing::ScopedEnv secret("MUFLOW_CLUSTER_TOKEN", token);  // this process's
  const std::string base =
      "wiring = \"sync\"\nbackend = \"cpu\"\n[cluster]\nnum_devices = 2\n"
      "threads_per_device = 1\n";
  const std::string rest =
      "[model]\npath = \"" + kModel + "\"\n[sampling]\ntemperature = 0.0\nstop_at_eos = false\n";
  const std::string one = temp_path("one"), two = temp_path("two");
  std::ofstream(one) << base << rest;
  std::ofstream(two) << base << "[[cluster.workers]]\naddress = \"" << address
                     << "\"\ndevices = [1]\n"
                     << rest;
  std::vector<std::vector<muflow::TokenId>> outputs;
  for (const std::string& path : {one, two}) {
    std::unique_ptr<muflow::Engine> engine = open_or_die(path);
    ASSERT_TRUE(engine);
    EXPECT_EQ(engine->info().num_devices, 2);
    std::vector<std::shared_ptr<Watch>> watches;
    for (const char* prompt : {"And God said, Let there be", "In the beginning"}) {
      watches.push_back(std::make_shared<Watch>());
      muflow::Result<muflow::RequestId> id = engine->submit(prompt, {12}, watch(watches.back()));
      ASSERT_TRUE(id.ok()) << id.status().to_string();
    }
    for (const std::shared_ptr<Watch>& w : watches) {
      const muflow::Completion c = finished(w);
      EXPECT_TRUE(c.status.ok()) << c.status.to_string();
      EXPECT_EQ(c.tokens.size(), 12u);
      outputs.push_back(c.tokens);
    }
    EXPECT_TRUE(engine->shutdown().ok());
  }
  ASSERT_EQ(outputs.size(), 4u);
  EXPECT_EQ(outputs[0], outputs[2]) << "request 0: the worker's run differs from one process";
  EXPECT_EQ(outputs[1], outputs[3]) << "request 1: the worker's run differs from one process";
}

TEST(ApiTest, BadRequestsAreRefusedWithoutCallbacks) {
  std::unique_ptr<muflow::Engine> engine = open_or_die(kTopology);
  ASSERT_TRUE(engine);
  auto w = std::make_shared<Watch>();
  const auto code = [](const muflow::Result<muflow::RequestId>& r) { return r.status().code(); };
  EXPECT_EQ(code(engine->submit("x", {0}, watch(w))), muflow::ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(engine->submit("x", {-5}, watch(w))), muflow::ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(engine->submit_tokens({}, {4}, watch(w))), muflow::ErrorCode::kInvalidArgument);
  muflow::Result<muflow::RequestId> oov = engine->submit_tokens({1, 4096}, {4}, watch(w));
  EXPECT_EQ(code(oov), muflow::ErrorCode::kInvalidArgument);
  EXPECT_THAT(oov.status().message(), HasSubstr("4096"));
  std::vector<muflow::TokenId> too_long(static_cast<size_t>(engine->info().max_position_embeddings),
                                        5);
  EXPECT_EQ(code(engine->submit_tokens(too_long, {4}, watch(w))),
            muflow::ErrorCode::kInvalidArgument);
  EXPECT_EQ(engine->detokenize({-1}).status().code(), muflow::ErrorCode::kInvalidArgument);
  // An empty text prompt is BOS alone: a valid request.
  auto bos_only = std::make_shared<Watch>();
  ASSERT_TRUE(engine->submit("", {3}, watch(bos_only)).ok());
  EXPECT_TRUE(finished(bos_only).status.ok());
  ASSERT_TRUE(engine->wait().ok());
  EXPECT_EQ(w->num_finish, 0);  // refused requests are never called back
  EXPECT_TRUE(w->streamed.empty());
}

// Per-request sampling: a seed reproduces a sampled output across requests, stop_at_eos =
// false runs to max_tokens, the topology's greedy default is kept when nothing is set, and a
// bad temperature or top_p is refused at submit.
TEST(ApiTest, PerRequestSamplingOverridesTheTopology) {
  std::unique_ptr<muflow::Engine> engine = open_or_die(kTopology);
  ASSERT_TRUE(engine);
  muflow::GenerationParams hot;
  hot.max_tokens = 20;
  hot.temperature = 1.2;
  hot.top_p = 0.9;
  hot.seed = 1234;
  hot.stop_at_eos = false;
  std::vector<std::shared_ptr<Watch>> w;
  for (int i = 0; i < 3; ++i) {
    w.push_back(std::make_shared<Watch>());
    muflow::GenerationParams p = hot;
    if (i == 2) p = muflow::GenerationParams{20};  // greedy, the topology's
    ASSERT_TRUE(engine->submit("And God said, Let there be", p, watch(w.back())).ok());
  }
  const muflow::Completion a = finished(w[0]), b = finished(w[1]), greedy = finished(w[2]);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.tokens.size(), 20u);
  EXPECT_EQ(a.reason, muflow::FinishReason::kLength);
  EXPECT_NE(a.tokens, greedy.tokens);
  const nlohmann::json cli = cli_generate("And God said, Let there be", 20);
  EXPECT_EQ(greedy.tokens, cli["output_ids"].get<std::vector<muflow::TokenId>>());
  muflow::GenerationParams bad;
  bad.temperature = -1.0;
  EXPECT_THAT(engine->submit("x", bad, {}).status().message(), HasSubstr("temperature"));
  bad = muflow::GenerationParams{};
  bad.top_p = 0.0;
  EXPECT_THAT(engine->submit("x", bad, {}).status().message(), HasSubstr("top_p"));
  ASSERT_TRUE(engine->wait().ok());
}

TEST(ApiTest, DefaultEngineServesTheShippedModel) {
  muflow::Result<std::unique_ptr<muflow::Engine>> engine = muflow::Engine::open_default();
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const muflow::EngineInfo& info = (*engine)->info();
  EXPECT_EQ(info.topology, "<embedded default>");
  EXPECT_TRUE(info.has_tokenizer);
  EXPECT_EQ(info.vocab_size, 4096);
  auto w = std::make_shared<Watch>();
  ASSERT_TRUE((*engine)->submit("In the beginning God created", {6}, watch(w)).ok());
  const muflow::Completion c = finished(w);
  EXPECT_TRUE(c.status.ok());
  EXPECT_FALSE(c.tokens.empty());
  EXPECT_FALSE(c.text.empty());
}

TEST(ApiTest, ModelWithoutTokenizerServesTokenIdsOnly) {
  // No [model] table: the synthetic demo model (random weights, no tokenizer.model).
  const std::string path = temp_path("synthetic");
  std::ofstream(path) << "wiring = \"sync\"\n[cluster]\nnum_devices = 2\n";
  std::unique_ptr<muflow::Engine> engine = open_or_die(path);
  ASSERT_TRUE(engine);
  EXPECT_FALSE(engine->info().has_tokenizer);
  muflow::Result<muflow::RequestId> text = engine->submit("text", {4});
  EXPECT_EQ(text.status().code(), muflow::ErrorCode::kFailedPrecondition);
  EXPECT_THAT(text.status().message(), HasSubstr("submit_tokens"));
  EXPECT_EQ(engine->tokenize("text").status().code(), muflow::ErrorCode::kFailedPrecondition);
  EXPECT_EQ(engine->detokenize({1}).status().code(), muflow::ErrorCode::kFailedPrecondition);
  auto w = std::make_shared<Watch>();
  ASSERT_TRUE(engine->submit_tokens({1, 7, 9}, {5}, watch(w)).ok());
  const muflow::Completion c = finished(w);
  EXPECT_TRUE(c.status.ok());
  EXPECT_FALSE(c.tokens.empty());
  EXPECT_EQ(c.prompt_tokens, (std::vector<muflow::TokenId>{1, 7, 9}));
  EXPECT_TRUE(c.text.empty());
  EXPECT_TRUE(w->pieces.empty());
}

TEST(ApiTest, VersionMatchesTheHeaders) {
  const std::string expected = std::to_string(MUFLOW_VERSION_MAJOR) + "." +
                               std::to_string(MUFLOW_VERSION_MINOR) + "." +
                               std::to_string(MUFLOW_VERSION_PATCH);
  EXPECT_EQ(std::string(muflow::version()), expected);
}

}  // namespace
