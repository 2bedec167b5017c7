// What the HTTP path costs: the same closed-loop load (C concurrent streams, each sending R
// requests one after another, greedy, `max_tokens` tokens each with EOS ignored) driven twice
// against one engine in one process — in-process through ServingEngine::submit, and over
// HTTP through `muflow serve`'s OpenAiServer on loopback (JSON, server-sent events, sockets)
// — alternating, `--repeats` times, medians reported. Throughput: generated tokens / wall
// time; ITL: gaps between a stream's consecutive tokens as its client saw them.
//
//   serve_overhead [--topology T.toml] [--concurrency 1,8,32] [--requests 4] [--max-tokens 64]
//                  [--repeats 3] [--csv out.csv]
//
// The HTTP clients run in this process and share its cores with the engine, as a load
// generator on the same machine would.
#include <httplib.h>

#include <CLI/CLI.hpp>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "actors/server.hpp"
#include "actors/serving_engine.hpp"
#include "engine/serving/metrics.hpp"
#include "http/server/openai_server.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using muflow::engine::serving::percentile_linear;

struct Result {
  double tokens_per_s = 0;
  double itl_mean_ms = 0, itl_p50_ms = 0, itl_p99_ms = 0;
  int64_t tokens = 0;
};

std::vector<int32_t> prompt_for(int stream, int k) {
  std::vector<int32_t> p = {1};
  for (int j = 0; j < 8; ++j) p.push_back(300 + (stream * 37 + k * 11 + j * 5) % 500);
  return p;
}

Result summarize(const std::vector<std::vector<double>>& gaps_per_stream, int64_t tokens,
                 double wall_s) {
  std::vector<double> gaps;
  for (const auto& g : gaps_per_stream) gaps.insert(gaps.end(), g.begin(), g.end());
  Result r;
  r.tokens = tokens;
  r.tokens_per_s = tokens / wall_s;
  double sum = 0;
  for (double g : gaps) sum += g;
  r.itl_mean_ms = gaps.empty() ? 0 : 1e3 * sum / static_cast<double>(gaps.size());
  r.itl_p50_ms = 1e3 * percentile_linear(gaps, 50);
  r.itl_p99_ms = 1e3 * percentile_linear(gaps, 99);
  return r;
}

// Runs `stream(s)` on `concurrency` threads; returns the wall seconds until all ended.
template <typename Fn>
double run_streams(int concurrency, Fn stream) {
  const Clock::time_point t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int s = 0; s < concurrency; ++s) {
    threads.emplace_back([&stream, s] {
      pthread_setname_np(pthread_self(), "bench.client");  // profiles tell client from server
      stream(s);
    });
  }
  for (auto& t : threads) t.join();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int64_t sum(const std::vector<int64_t>& v) {
  int64_t total = 0;
  for (int64_t n : v) total += n;
  return total;
}

Result run_in_process(muflow::actors::ServingEngine& engine, int concurrency, int requests,
                      int64_t max_tokens) {
  std::vector<std::vector<double>> gaps(concurrency);
  std::vector<int64_t> tokens(concurrency, 0);
  const double wall = run_streams(concurrency, [&](int s) {
    for (int k = 0; k < requests; ++k) {
      muflow::engine::serving::Request r;
      r.prompt = prompt_for(s, k);
      r.max_new_tokens = max_tokens;
      muflow::engine::topology::SamplingSpec greedy;
      greedy.stop_at_eos = false;
      r.sampling = greedy;
      auto done = std::make_shared<std::promise<void>>();
      auto last = std::make_shared<Clock::time_point>();
      auto first = std::make_shared<bool>(true);
      muflow::actors::RequestCallbacks cb;
      cb.on_token = [&, s, last, first](int32_t) {
        const Clock::time_point now = Clock::now();
        if (!*first) gaps[s].push_back(std::chrono::duration<double>(now - *last).count());
        *first = false;
        *last = now;
        ++tokens[s];
      };
      cb.on_finish = [done](const muflow::actors::RequestOutput&, const absl::Status&) {
        done->set_value();
      };
      if (!engine.submit(std::move(r), std::move(cb)).ok()) return;
      done->get_future().wait();
    }
  });
  return summarize(gaps, sum(tokens), wall);
}

Result run_http(int port, int concurrency, int requests, int64_t max_tokens) {
  std::vector<std::vector<double>> gaps(concurrency);
  std::vector<int64_t> tokens(concurrency, 0);
  const double wall = run_streams(concurrency, [&](int s) {
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(std::chrono::seconds(120));
    for (int k = 0; k < requests; ++k) {
      nlohmann::json body = {{"prompt", prompt_for(s, k)},
                             {"max_tokens", max_tokens},
                             {"temperature", 0},
                             {"ignore_eos", true},
                             {"stream", true}};
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.set_header("Content-Type", "application/json");
      req.body = body.dump();
      std::string buffer;
      bool first = true;
      Clock::time_point last;
      req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
        buffer.append(data, len);
        for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
          const std::string event = buffer.substr(0, end);
          buffer.erase(0, end + 2);
          if (event.find("\"finish_reason\":null") == std::string::npos) continue;
          const Clock::time_point now = Clock::now();
          if (!first) gaps[s].push_back(std::chrono::duration<double>(now - last).count());
          first = false;
          last = now;
          ++tokens[s];
        }
        return true;
      };
      httplib::Response res;
      httplib::Error error = httplib::Error::Success;
      if (!client.send(req, res, error) || res.status != 200) {
        std::fprintf(stderr, "serve_overhead: HTTP request failed (status %d, error %d)\n",
                     res.status, static_cast<int>(error));
        return;
      }
    }
  });
  return summarize(gaps, sum(tokens), wall);
}

Result median(std::vector<Result> runs) {
  auto pick = [&](auto field) {
    std::vector<double> v;
    for (const Result& r : runs) v.push_back(r.*field);
    return percentile_linear(v, 50);
  };
  Result m;
  m.tokens_per_s = pick(&Result::tokens_per_s);
  m.itl_mean_ms = pick(&Result::itl_mean_ms);
  m.itl_p50_ms = pick(&Result::itl_p50_ms);
  m.itl_p99_ms = pick(&Result::itl_p99_ms);
  m.tokens = runs.front().tokens;
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"HTTP path vs in-process submit on one engine (see the file's header)"};
  std::string topology_file, csv;
  std::vector<int> concurrency = {1, 8, 32};
  int requests = 4, repeats = 3;
  int64_t max_tokens = 64;
  app.add_option("--topology", topology_file, "topology (default: the embedded kjv model)");
  app.add_option("--concurrency", concurrency, "concurrent streams")->delimiter(',');
  app.add_option("--requests", requests, "requests per stream")->check(CLI::Range(1, 10000));
  app.add_option("--max-tokens", max_tokens, "tokens per request")->check(CLI::Range(2, 100000));
  app.add_option("--repeats", repeats, "alternating repeats (median)")->check(CLI::Range(1, 100));
  app.add_option("--csv", csv, "also write the table as CSV");
  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<muflow::engine::topology::Topology> topo =
      topology_file.empty() ? muflow::engine::topology::default_topology()
                            : muflow::engine::topology::parse_topology_file(topology_file);
  if (!topo.ok()) {
    std::fprintf(stderr, "serve_overhead: %s\n", std::string(topo.status().message()).c_str());
    return 1;
  }
  topo->trace_file.clear();
  auto server = muflow::actors::Server::create(*topo);
  if (!server.ok()) {
    std::fprintf(stderr, "serve_overhead: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  auto engine = muflow::actors::ServingEngine::start(**server);
  if (!engine.ok()) {
    std::fprintf(stderr, "serve_overhead: %s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  muflow::http::ServeOptions options;
  options.port = 0;
  options.max_concurrent_requests = 64;  // muflow serve's default (a pool of 72 threads)
  muflow::http::OpenAiServer http(**server, **engine, (*server)->tokenizer(), options);
  if (absl::Status s = http.bind(); !s.ok()) {
    std::fprintf(stderr, "serve_overhead: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::thread listener([&] {
    pthread_setname_np(pthread_self(), "http.server");  // its worker pool inherits the name
    http.serve();
  });
  // Warm-up: one request each way.
  run_in_process(**engine, 1, 1, max_tokens);
  run_http(http.port(), 1, 1, max_tokens);

  std::FILE* out = csv.empty() ? nullptr : std::fopen(csv.c_str(), "w");
  if (!csv.empty() && out == nullptr) {
    std::fprintf(stderr, "serve_overhead: cannot write %s\n", csv.c_str());
  }
  if (out) {
    std::fprintf(out, "streams,path,tokens_per_s,itl_mean_ms,itl_p50_ms,itl_p99_ms\n");
  }
  std::printf(
      "%s: wiring %s, %zu devices; %d requests per stream, %lld tokens each, median of %d\n",
      topo->source.c_str(), topo->wiring.c_str(), topo->devices.size(), requests,
      static_cast<long long>(max_tokens), repeats);
  std::printf("%8s %-11s %12s %10s %10s %10s %14s\n", "streams", "path", "tokens/s", "ITL mean",
              "ITL p50", "ITL p99", "HTTP/in-proc");
  for (int c : concurrency) {
    std::vector<Result> in_process, over_http;
    for (int r = 0; r < repeats; ++r) {
      in_process.push_back(run_in_process(**engine, c, requests, max_tokens));
      over_http.push_back(run_http(http.port(), c, requests, max_tokens));
    }
    const Result a = median(in_process), b = median(over_http);
    for (const auto& [name, res] : {std::pair{"in-process", a}, std::pair{"http", b}}) {
      std::printf("%8d %-11s %12.1f %8.2fms %8.2fms %8.2fms %14s\n", c, name, res.tokens_per_s,
                  res.itl_mean_ms, res.itl_p50_ms, res.itl_p99_ms,
                  std::string(name) == "http"
                      ? (std::to_string(b.tokens_per_s / a.tokens_per_s).substr(0, 5) + "x").c_str()
                      : "");
      if (out) {
        std::fprintf(out, "%d,%s,%.2f,%.3f,%.3f,%.3f\n", c, name, res.tokens_per_s, res.itl_mean_ms,
                     res.itl_p50_ms, res.itl_p99_ms);
        std::fflush(out);
      }
    }
    std::fflush(stdout);
  }
  if (out) std::fclose(out);
  http.stop(0);
  listener.join();
  return (*engine)->shutdown().ok() ? 0 : 1;
}
