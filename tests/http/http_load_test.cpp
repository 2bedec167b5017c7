// `muflow bench --url`'s load generator against an in-test cpp-httplib server that streams fake
// token events with known delays: the request bodies, the times measured (hard lower bounds
// from the server's sleeps, generous upper bounds), throughput arithmetic, the concurrency
// cap, and every failure path (429, dropped connection, missing [DONE], stall, no event
// stream, no server, bad key, bad options).
//
// Timing bounds: the server sleeps before each token, so TTFT >= first delay and E2E >= first
// delay + (n - 1) * gap hold on any machine; upper bounds allow seconds of scheduling delay.

#include "http/client/http_load.hpp"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/serving/workload.hpp"
#include "http/client/bench_metrics.hpp"

namespace muflow::http::client {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;
using engine::serving::Request;

enum class Mode { kStream, kRateLimit, kDropAfter, kNoDone, kStall, kNotAStream };

struct FakeConfig {
  Mode mode = Mode::kStream;
  int first_token_ms = 100;   // after the request arrived
  int gap_ms = 50;            // between tokens
  int drop_after = 2;         // kDropAfter: tokens sent before the connection is cut
  bool split_events = false;  // write each event in three pieces, CRLF line ends
  std::string api_key;        // required when non-empty
};

// An OpenAI-style completions server speaking `muflow serve`'s streaming protocol with fake
// tokens "t0 ", "t1 ", ... Owned by the test body; handlers run on the server's threads.
class FakeServer {
 public:
  explicit FakeServer(FakeConfig config) : config_(std::move(config)) {
    server_.new_task_queue = [] { return new httplib::ThreadPool(32); };
    server_.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req, res)) return;
      res.set_content(R"({"object":"list","data":[{"id":"fake-moe","object":"model"}]})",
                      "application/json");
    });
    server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      handle_completion(req, res);
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() is a no-op before the listen loop runs: wait for it (bounded) so that the
    // destructor always ends the loop.
    for (int i = 0; i < 10000 && !server_.is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(server_.is_running()) << "fake server did not start";
  }

  ~FakeServer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
    server_.stop();
    thread_.join();
  }

  BaseUrl url() const {
    BaseUrl u;
    u.scheme = "http";
    u.host = "127.0.0.1";
    u.port = port_;
    return u;
  }
  int port() const { return port_; }

  std::vector<Json> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  int max_in_flight() {
    std::lock_guard<std::mutex> lock(mu_);
    return max_in_flight_;
  }

 private:
  bool authorized(const httplib::Request& req, httplib::Response& res) {
    if (config_.api_key.empty() ||
        req.get_header_value("Authorization") == "Bearer " + config_.api_key) {
      return true;
    }
    res.status = 401;
    res.set_content(
        R"({"error":{"message":"invalid API key","type":"auth","code":"invalid_api_key"}})",
        "application/json");
    return false;
  }

  void handle_completion(const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    Json body = Json::parse(req.body, nullptr, false);
    {
      std::lock_guard<std::mutex> lock(mu_);
      bodies_.push_back(body);
    }
    if (config_.mode == Mode::kRateLimit) {
      res.status = 429;
      res.set_header("Retry-After", "2");
      res.set_content(R"({"error":{"message":"too many requests","type":"rate_limit",)"
                      R"("code":"rate_limit_exceeded"}})",
                      "application/json");
      return;
    }
    if (config_.mode == Mode::kNotAStream) {
      res.set_content(R"({"choices":[{"text":"all at once"}]})", "application/json");
      return;
    }
    const int64_t n = body.value("max_tokens", int64_t{1});
    const int64_t num_prompt =
        body.contains("prompt") ? static_cast<int64_t>(body["prompt"].size()) : 0;
    res.set_chunked_content_provider("text/event-stream",
                                     [this, n, num_prompt](size_t, httplib::DataSink& sink) {
                                       {
                                         std::lock_guard<std::mutex> lock(mu_);
                                         max_in_flight_ = std::max(max_in_flight_, ++in_flight_);
                                       }
                                       bool counted = true;  // stream() may end it early
                                       const bool ok = stream(n, num_prompt, sink, &counted);
                                       std::lock_guard<std::mutex> lock(mu_);
                                       if (counted) --in_flight_;
                                       return ok;
                                     });
  }

  bool write_event(httplib::DataSink& sink, const std::string& data) {
    if (!config_.split_events) {
      const std::string e = "data: " + data + "\n\n";
      return sink.write(e.data(), e.size());
    }
    const std::string e = "data: " + data + "\r\n\r\n";
    const size_t a = e.size() / 3, b = e.size() - 1;  // the last cut splits CR | LF
    return sink.write(e.data(), a) && sink.write(e.data() + a, b - a) &&
           sink.write(e.data() + b, e.size() - b);
  }

  // Streams n tokens; false = cut the connection. `*counted` is cleared when the request stops
  // counting as in flight before the lambda returns: just before [DONE], after which a client
  // may send its next request while this handler is still unwinding.
  bool stream(int64_t n, int64_t num_prompt, httplib::DataSink& sink, bool* counted) {
    if (config_.mode == Mode::kStall) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(10), [this] { return released_; });
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(config_.first_token_ms));
    for (int64_t i = 0; i < n; ++i) {
      if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(config_.gap_ms));
      if (config_.mode == Mode::kDropAfter && i == config_.drop_after) return false;
      const Json chunk = {
          {"id", "cmpl-1"},
          {"object", "text_completion"},
          {"created", 0},
          {"model", "fake-moe"},
          {"choices",
           {{{"index", 0}, {"text", absl::StrCat("t", i, " ")}, {"finish_reason", nullptr}}}}};
      if (!write_event(sink, chunk.dump())) return false;
      if (i == 0) {  // a keep-alive comment between tokens must not count
        const std::string ping = ": ping\n\n";
        if (!sink.write(ping.data(), ping.size())) return false;
      }
    }
    const Json last = {{"id", "cmpl-1"},
                       {"object", "text_completion"},
                       {"created", 0},
                       {"model", "fake-moe"},
                       {"choices", {{{"index", 0}, {"text", ""}, {"finish_reason", "length"}}}}};
    const Json usage = {{"id", "cmpl-1"},
                        {"object", "text_completion"},
                        {"created", 0},
                        {"model", "fake-moe"},
                        {"choices", Json::array()},
                        {"usage",
                         {{"prompt_tokens", num_prompt},
                          {"completion_tokens", n},
                          {"total_tokens", num_prompt + n}}}};
    if (!write_event(sink, last.dump()) || !write_event(sink, usage.dump())) return false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      --in_flight_;
      *counted = false;
    }
    if (config_.mode != Mode::kNoDone && !write_event(sink, "[DONE]")) return false;
    sink.done();
    return true;
  }

  FakeConfig config_;
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  std::vector<Json> bodies_;
  int in_flight_ = 0;
  int max_in_flight_ = 0;
};

// n requests arriving at 0 with prompts {3, 4, 5} and `max_tokens` each.
std::vector<Request> burst(int n, int64_t max_tokens) {
  std::vector<Request> out;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.id = i;
    r.prompt = {3, 4, 5};
    r.max_new_tokens = max_tokens;
    out.push_back(r);
  }
  return out;
}

// A loopback port nothing listens on: bound (not listening) to learn a free number, then
// closed, so connecting is refused.
int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

LoadOptions options(double read_timeout_s = 30.0) {
  LoadOptions o;
  o.model = "fake-moe";
  o.client.read_timeout_s = read_timeout_s;
  o.client.connect_timeout_s = 5.0;
  return o;
}

TEST(HttpLoad, PoissonWorkloadIsSentAndTimed) {
  FakeServer server(FakeConfig{});
  engine::topology::WorkloadSpec spec;
  spec.kind = "poisson";
  spec.num_requests = 6;
  spec.rate_per_s = 20.0;
  spec.input_min = 4;
  spec.input_max = 8;
  spec.output_min = 3;
  spec.output_max = 5;
  spec.max_new_tokens = 0;
  spec.seed = 7;
  std::printf("workload seed %llu\n", static_cast<unsigned long long>(spec.seed));
  absl::StatusOr<std::vector<Request>> requests = engine::serving::make_requests(spec, 1000, {});
  ASSERT_TRUE(requests.ok()) << requests.status();

  std::vector<int64_t> finished;
  absl::StatusOr<LoadRun> run =
      run_http_load(server.url(), *requests, options(),
                    [&](const RequestRecord& r) { finished.push_back(r.id); });
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->records.size(), requests->size());

  // Every request arrived once, with its own token ids and the protocol's fields.
  std::sort(finished.begin(), finished.end());
  std::vector<int64_t> ids(requests->size());
  std::iota(ids.begin(), ids.end(), 0);
  EXPECT_EQ(finished, ids);
  const std::vector<Json> bodies = server.bodies();
  ASSERT_EQ(bodies.size(), requests->size());
  for (const Request& r : *requests) {
    const auto it = std::find_if(bodies.begin(), bodies.end(), [&](const Json& b) {
      return b["prompt"].get<std::vector<int32_t>>() == r.prompt;
    });
    ASSERT_NE(it, bodies.end()) << "request " << r.id << "'s prompt was not sent";
    EXPECT_EQ((*it)["model"], "fake-moe");
    EXPECT_EQ((*it)["max_tokens"], r.max_new_tokens);
    EXPECT_EQ((*it)["stream"], true);
    EXPECT_EQ((*it)["stream_options"]["include_usage"], true);
    EXPECT_EQ((*it)["ignore_eos"], true);
    EXPECT_EQ((*it)["temperature"], 0.0);
  }

  int64_t total_output = 0, total_gaps = 0, num_multi = 0;
  double last_arrival = 0.0;
  for (size_t i = 0; i < run->records.size(); ++i) {
    const RequestRecord& rec = run->records[i];
    const Request& req = (*requests)[i];
    const CompletionResult& r = rec.result;
    ASSERT_TRUE(r.ok) << "request " << rec.id << ": " << r.error;
    EXPECT_EQ(rec.id, req.id);
    EXPECT_EQ(rec.num_prompt_tokens, static_cast<int64_t>(req.prompt.size()));
    EXPECT_EQ(r.http_status, 200);
    // The closing chunk (empty text + finish_reason) and the ping are not tokens.
    EXPECT_EQ(static_cast<int64_t>(r.token_times_s.size()), req.max_new_tokens);
    EXPECT_EQ(r.num_output_tokens(), req.max_new_tokens);
    EXPECT_EQ(r.usage_prompt_tokens, static_cast<int64_t>(req.prompt.size()));
    EXPECT_EQ(r.finish_reason, "length");
    EXPECT_EQ(r.text.substr(0, 6), "t0 t1 ");
    EXPECT_GE(r.start_s, rec.scheduled_s);
    EXPECT_DOUBLE_EQ(rec.scheduled_s, req.arrival_s);
    EXPECT_GE(r.ttft_s(), 0.100);
    EXPECT_LT(r.ttft_s(), 0.100 + 5.0);
    EXPECT_GE(r.latency_s(), 0.100 + 0.050 * static_cast<double>(req.max_new_tokens - 1));
    EXPECT_LT(r.latency_s(), 10.0);
    total_output += req.max_new_tokens;
    total_gaps += req.max_new_tokens - 1;
    num_multi += req.max_new_tokens > 1 ? 1 : 0;
    last_arrival = std::max(last_arrival, req.arrival_s);
  }

  const BenchMetrics m = summarize_http_load(*run);
  std::printf("%s", format_bench_report(m, {"fake", "fake-moe", 0, "poisson seed 7"}).c_str());
  EXPECT_EQ(m.num_successful, 6);
  EXPECT_EQ(m.num_failed, 0);
  EXPECT_EQ(m.total_output_tokens, total_output);
  EXPECT_GE(m.duration_s, last_arrival + 0.100 + 0.050 * 2);
  EXPECT_DOUBLE_EQ(m.output_token_throughput, static_cast<double>(total_output) / m.duration_s);
  EXPECT_DOUBLE_EQ(m.request_throughput, 6.0 / m.duration_s);
  EXPECT_EQ(m.itl.num_samples, total_gaps);
  EXPECT_EQ(m.tpot.num_samples, num_multi);
  EXPECT_GE(m.ttft.mean_ms, 100.0);
  EXPECT_LT(m.ttft.mean_ms, 5100.0);
  // Nominal 50 ms; the bounds only catch gross errors (units, wrong events counted).
  EXPECT_GT(m.itl.mean_ms, 10.0);
  EXPECT_LT(m.itl.mean_ms, 1000.0);
  EXPECT_GT(m.tpot.mean_ms, 10.0);
  EXPECT_LT(m.tpot.mean_ms, 1000.0);
  EXPECT_GE(m.e2el.p50_ms, 100.0 + 2 * 50.0);
}

TEST(HttpLoad, EventsSplitAcrossChunksWithCrLf) {
  FakeConfig c;
  c.split_events = true;
  c.first_token_ms = 10;
  c.gap_ms = 10;
  FakeServer server(c);
  absl::StatusOr<LoadRun> run = run_http_load(server.url(), burst(2, 4), options());
  ASSERT_TRUE(run.ok()) << run.status();
  for (const RequestRecord& rec : run->records) {
    ASSERT_TRUE(rec.result.ok) << rec.result.error;
    EXPECT_EQ(rec.result.token_times_s.size(), 4u);
    EXPECT_EQ(rec.result.text, "t0 t1 t2 t3 ");
  }
}

TEST(HttpLoad, RateLimitedRequestsFailWithTheReason) {
  FakeConfig c;
  c.mode = Mode::kRateLimit;
  FakeServer server(c);
  absl::StatusOr<LoadRun> run = run_http_load(server.url(), burst(3, 4), options());
  ASSERT_TRUE(run.ok()) << run.status();
  for (const RequestRecord& rec : run->records) {
    const CompletionResult& r = rec.result;
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.failure, FailureKind::kHttpStatus);
    EXPECT_EQ(r.http_status, 429);
    EXPECT_EQ(r.retry_after_s, 2.0);
    EXPECT_THAT(r.error, HasSubstr("HTTP 429 (rate_limit_exceeded): too many requests"));
    EXPECT_THAT(r.error, HasSubstr("Retry-After: 2 s"));
    EXPECT_TRUE(r.token_times_s.empty());
  }
  const BenchMetrics m = summarize_http_load(*run);
  EXPECT_EQ(m.num_successful, 0);
  EXPECT_EQ(m.num_failed, 3);
  ASSERT_EQ(m.failures.size(), 1u);
  EXPECT_EQ(m.failures[0].http_status, 429);
  EXPECT_EQ(m.failures[0].count, 3);
  EXPECT_EQ(m.output_token_throughput, 0.0);
  EXPECT_THAT(format_bench_report(m, {}), HasSubstr("HTTP 429:"));
}

TEST(HttpLoad, DroppedConnectionFails) {
  FakeConfig c;
  c.mode = Mode::kDropAfter;
  c.drop_after = 2;
  c.first_token_ms = 10;
  c.gap_ms = 10;
  FakeServer server(c);
  absl::StatusOr<LoadRun> run = run_http_load(server.url(), burst(2, 5), options());
  ASSERT_TRUE(run.ok()) << run.status();
  for (const RequestRecord& rec : run->records) {
    EXPECT_FALSE(rec.result.ok);
    EXPECT_EQ(rec.result.failure, FailureKind::kDropped) << rec.result.error;
    EXPECT_EQ(rec.result.token_times_s.size(), 2u);
  }
  const BenchMetrics m = summarize_http_load(*run);
  EXPECT_EQ(m.num_failed, 2);
  EXPECT_EQ(m.total_output_tokens, 0);  // tokens of failed requests do not count
  ASSERT_EQ(m.failures.size(), 1u);
  EXPECT_EQ(m.failures[0].kind, "dropped");
}

TEST(HttpLoad, StreamWithoutDoneFails) {
  FakeConfig c;
  c.mode = Mode::kNoDone;
  c.first_token_ms = 10;
  c.gap_ms = 10;
  FakeServer server(c);
  absl::StatusOr<LoadRun> run = run_http_load(server.url(), burst(1, 3), options());
  ASSERT_TRUE(run.ok()) << run.status();
  const CompletionResult& r = run->records[0].result;
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failure, FailureKind::kDropped);
  EXPECT_THAT(r.error, HasSubstr("ended before 'data: [DONE]' after 3 token events"));
}

TEST(HttpLoad, StalledServerHitsTheReadTimeout) {
  FakeConfig c;
  c.mode = Mode::kStall;
  FakeServer server(c);
  absl::StatusOr<LoadRun> run = run_http_load(server.url(), burst(1, 3), options(0.3));
  ASSERT_TRUE(run.ok()) << run.status();
  const CompletionResult& r = run->records[0].result;
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failure, FailureKind::kReadTimeout) << r.error;
  EXPECT_THAT(r.error, HasSubstr("read timeout"));
  EXPECT_GE(r.end_s - r.start_s, 0.25);
}

TEST(HttpLoad, AnswerThatIsNotAnEventStreamFails) {
  FakeConfig c;
  c.mode = Mode::kNotAStream;
  FakeServer server(c);
  absl::StatusOr<LoadRun> run = run_http_load(server.url(), burst(1, 3), options());
  ASSERT_TRUE(run.ok()) << run.status();
  const CompletionResult& r = run->records[0].result;
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failure, FailureKind::kBadStream);
  EXPECT_THAT(r.error, HasSubstr("expected text/event-stream"));
}

TEST(HttpLoad, ConcurrencyCapHoldsRequestsBack) {
  FakeConfig c;
  c.first_token_ms = 20;
  c.gap_ms = 10;
  FakeServer server(c);
  LoadOptions o = options();
  o.max_concurrency = 1;
  absl::StatusOr<LoadRun> run = run_http_load(server.url(), burst(4, 2), o);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->max_in_flight, 1);
  EXPECT_EQ(server.max_in_flight(), 1);
  std::vector<const CompletionResult*> by_start;
  for (const RequestRecord& rec : run->records) {
    ASSERT_TRUE(rec.result.ok) << rec.result.error;
    by_start.push_back(&rec.result);
  }
  std::sort(by_start.begin(), by_start.end(),
            [](const auto* a, const auto* b) { return a->start_s < b->start_s; });
  for (size_t k = 1; k < by_start.size(); ++k) {
    EXPECT_GE(by_start[k]->start_s, by_start[k - 1]->end_s);  // one at a time
  }
  // Each request takes >= 20 + 10 ms, so the k-th to start waited >= k * 30 ms for the slot.
  EXPECT_GE(by_start.back()->start_s, 3 * 0.030);
  EXPECT_GE(summarize_http_load(*run).mean_queue_ms, (0 + 30 + 60 + 90) / 4.0);
}

TEST(HttpLoad, ApiKeyIsSentAndModelsAreListed) {
  FakeConfig c;
  c.api_key = "sekret";
  c.first_token_ms = 5;
  c.gap_ms = 5;
  FakeServer server(c);
  const auto origin = std::chrono::steady_clock::now();

  absl::StatusOr<std::unique_ptr<OpenAiStreamClient>> anonymous =
      OpenAiStreamClient::create(server.url(), ClientOptions{}, origin);
  ASSERT_TRUE(anonymous.ok());
  absl::StatusOr<std::vector<std::string>> models = (*anonymous)->list_models();
  ASSERT_FALSE(models.ok());
  EXPECT_TRUE(absl::IsUnauthenticated(models.status()));
  EXPECT_THAT(std::string(models.status().message()), HasSubstr("invalid API key"));
  EXPECT_THAT(std::string(models.status().message()), HasSubstr("--api-key"));

  ClientOptions with_key;
  with_key.api_key = "sekret";
  absl::StatusOr<std::unique_ptr<OpenAiStreamClient>> client =
      OpenAiStreamClient::create(server.url(), with_key, origin);
  ASSERT_TRUE(client.ok());
  models = (*client)->list_models();
  ASSERT_TRUE(models.ok()) << models.status();
  EXPECT_EQ(*models, std::vector<std::string>{"fake-moe"});

  LoadOptions o = options();
  o.client.api_key = "sekret";
  absl::StatusOr<LoadRun> run = run_http_load(server.url(), burst(1, 2), o);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE(run->records[0].result.ok) << run->records[0].result.error;

  run = run_http_load(server.url(), burst(1, 2), options());  // no key
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->records[0].result.http_status, 401);
  EXPECT_THAT(run->records[0].result.error, HasSubstr("HTTP 401 (invalid_api_key)"));
}

TEST(HttpLoad, UnreachableServerGivesClearErrors) {
  const int port = closed_port();
  absl::StatusOr<BaseUrl> url = parse_base_url("http://127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(url.ok());
  absl::StatusOr<std::unique_ptr<OpenAiStreamClient>> client =
      OpenAiStreamClient::create(*url, ClientOptions{}, std::chrono::steady_clock::now());
  ASSERT_TRUE(client.ok());
  absl::StatusOr<std::vector<std::string>> models = (*client)->list_models();
  ASSERT_FALSE(models.ok());
  EXPECT_TRUE(absl::IsUnavailable(models.status()));
  EXPECT_THAT(std::string(models.status().message()),
              HasSubstr("cannot connect to http://127.0.0.1:" + std::to_string(port)));

  absl::StatusOr<LoadRun> run = run_http_load(*url, burst(2, 2), options());
  ASSERT_TRUE(run.ok()) << run.status();
  for (const RequestRecord& rec : run->records) {
    EXPECT_FALSE(rec.result.ok);
    EXPECT_EQ(rec.result.failure, FailureKind::kConnect) << rec.result.error;
    EXPECT_THAT(rec.result.error, HasSubstr("cannot connect"));
  }
  const BenchMetrics m = summarize_http_load(*run);
  ASSERT_EQ(m.failures.size(), 1u);
  EXPECT_EQ(m.failures[0].kind, "connect");
}

TEST(HttpLoad, BadOptionsAndRequestsAreRejectedBeforeSending) {
  FakeServer server(FakeConfig{});
  LoadOptions no_model = options();
  no_model.model.clear();
  EXPECT_TRUE(absl::IsInvalidArgument(run_http_load(server.url(), burst(1, 2), no_model).status()));
  LoadOptions negative = options();
  negative.max_concurrency = -1;
  EXPECT_TRUE(absl::IsInvalidArgument(run_http_load(server.url(), burst(1, 2), negative).status()));
  LoadOptions zero_timeout = options();
  zero_timeout.client.read_timeout_s = 0.0;
  EXPECT_THAT(
      std::string(run_http_load(server.url(), burst(1, 2), zero_timeout).status().message()),
      HasSubstr("read_timeout_s must be a finite number > 0"));
  std::vector<Request> bad = burst(2, 2);
  bad[1].prompt.clear();
  EXPECT_THAT(std::string(run_http_load(server.url(), bad, options()).status().message()),
              HasSubstr("request 1: empty prompt"));
  bad = burst(1, 2);
  bad[0].arrival_s = -1.0;
  EXPECT_TRUE(absl::IsInvalidArgument(run_http_load(server.url(), bad, options()).status()));
  bad = burst(1, 0);
  EXPECT_TRUE(absl::IsInvalidArgument(run_http_load(server.url(), bad, options()).status()));
  EXPECT_TRUE(server.bodies().empty());  // nothing was sent
}

}  // namespace
}  // namespace muflow::http::client
