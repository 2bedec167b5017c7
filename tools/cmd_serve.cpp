// `muflow serve [TOPOLOGY]`: an OpenAI-compatible HTTP server (http/server/) in front of a
// long-lived engine; the embedded kjv model by default. Stops gracefully on SIGINT/SIGTERM.
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "actors/server.hpp"
#include "actors/serving_engine.hpp"
#include "http/server/chat_template.hpp"
#include "http/server/openai_server.hpp"
#include "tools/cluster_launch.hpp"
#include "tools/commands.hpp"
#include "tools/topology_arg.hpp"

namespace muflow::tools {
namespace {

int fail_serve(const std::string& what) { return command_failed("serve", what); }

}  // namespace

Command add_serve_command(CLI::App& app) {
  struct Options {
    std::string topology, host = "127.0.0.1", api_key, model_name;
    int port = 8000;
    int64_t max_concurrent = 64, max_body_bytes = 1 << 20, default_max_tokens = 16;
    double shutdown_grace_s = 10.0;
    bool spawn_workers = false;
    int64_t heartbeat_timeout_ms =
        actors::cluster::ClusterDriverOptions{}.heartbeat_timeout.count();
    int64_t rejoin_interval_ms = actors::cluster::ClusterDriverOptions{}.rejoin_interval.count();
    int64_t max_message_mib = kDefaultMaxMessageMib;
  };
  auto o = std::make_shared<Options>();
  app.add_option("topology", o->topology,
                 "topology TOML file (default: the embedded kjv-mixtral-tiny-bf16 model)");
  app.add_option("--host", o->host, "address to bind (default 127.0.0.1: this machine only)");
  app.add_option("--port", o->port, "TCP port (0: any free port, printed at start)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--api-key", o->api_key,
                 "require 'Authorization: Bearer KEY' on every route but /health "
                 "(default: $MUFLOW_API_KEY when set)")
      ->envname("MUFLOW_API_KEY");
  app.add_option("--model-name", o->model_name,
                 "model id served in /v1/models and responses (default: the model folder's "
                 "name)");
  app.add_option("--max-concurrent", o->max_concurrent,
                 "generation requests in the engine at once; more get 429 + Retry-After")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}))
      ->capture_default_str();
  app.add_option("--max-body-bytes", o->max_body_bytes, "larger request bodies get 413")
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--default-max-tokens", o->default_max_tokens,
                 "completions without max_tokens generate this many (OpenAI's default: 16)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--shutdown-grace", o->shutdown_grace_s,
                 "seconds in-flight requests may finish after SIGINT/SIGTERM before they are "
                 "cancelled")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_flag("--spawn-workers", o->spawn_workers,
               "start the topology's [[cluster.workers]] here as loopback `muflow worker` "
               "processes (port 0: any free port), and stop them when the server stops; one "
               "that dies is started again on its port and taken back (unless "
               "--rejoin-interval-ms 0); without a cluster token ($MUFLOW_CLUSTER_TOKEN, "
               "[cluster] token_file) a random one is made for them");
  add_heartbeat_option(app, &o->heartbeat_timeout_ms);
  add_rejoin_option(app, &o->rejoin_interval_ms);
  add_max_message_option(app, &o->max_message_mib);
  return [o]() {
    // Signals go to one watcher thread: block them here, before any thread is spawned (CAF's
    // workers and cpp-httplib's pool inherit the mask).
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not kill the server

    absl::StatusOr<engine::topology::Topology> loaded = load_topology_arg(o->topology);
    if (!loaded.ok()) return fail_serve(std::string(loaded.status().message()));
    engine::topology::Topology topo = std::move(*loaded);
    topo.trace_file.clear();  // a server runs for long: no in-memory trace
    if (topo.backend == "sim") {
      return fail_serve(topo.source +
                        ": backend 'sim' runs in virtual time with every request known up front; "
                        "serve a real-math backend (backend = \"cpu\"), or use `muflow run` / "
                        "`muflow bench` for simulations");
    }
    std::fprintf(stderr, "muflow serve: %s: wiring %s, backend %s, %zu devices, loading model...\n",
                 topo.source.c_str(), topo.wiring.c_str(), topo.backend.c_str(),
                 topo.devices.size());
    // Worker processes (#18): started here with --spawn-workers, joined by the engine; a lost
    // one is recovered from while the server runs (actors/serving_engine.hpp).
    std::unique_ptr<actors::cluster::LaunchedWorkers> workers;
    if (o->spawn_workers) {
      if (topo.workers.empty()) {
        return fail_serve("--spawn-workers: " + topo.source + " lists no [[cluster.workers]]");
      }
      absl::StatusOr<std::unique_ptr<actors::cluster::LaunchedWorkers>> launched =
          spawn_workers(topo, /*quiet=*/false, "muflow serve", o->max_message_mib);
      if (!launched.ok()) return fail_serve(std::string(launched.status().message()));
      workers = std::move(*launched);
    }
    absl::StatusOr<std::unique_ptr<actors::Server>> server = actors::Server::create(topo);
    if (!server.ok()) return fail_serve(std::string(server.status().message()));
    actors::cluster::ClusterDriverOptions cluster;
    cluster.heartbeat_timeout = std::chrono::milliseconds(o->heartbeat_timeout_ms);
    cluster.rejoin_interval = std::chrono::milliseconds(o->rejoin_interval_ms);
    cluster.max_message_bytes = o->max_message_mib << 20;
    if (absl::Status s = attach_workers(**server, topo, cluster); !s.ok()) {
      return fail_serve(std::string(s.message()));
    }
    absl::StatusOr<std::unique_ptr<actors::ServingEngine>> engine =
        actors::ServingEngine::start(**server);
    if (!engine.ok()) return fail_serve(std::string(engine.status().message()));

    http::ServeOptions options;
    options.host = o->host;
    options.port = o->port;
    options.api_key = o->api_key;
    options.model_name = o->model_name;
    if (options.model_name.empty()) {
      options.model_name = topo.model.path.empty()
                               ? std::string("synthetic")
                               : std::filesystem::path(topo.model.path).filename().string();
    }
    options.max_concurrent_requests = o->max_concurrent;
    options.max_body_bytes = static_cast<size_t>(o->max_body_bytes);
    options.default_max_tokens = o->default_max_tokens;
    if (!topo.model.path.empty() && http::model_has_chat_template(topo.model.path)) {
      std::fprintf(stderr,
                   "muflow serve: note: %s has a Jinja chat_template; chat requests use the "
                   "plain template instead (http/README.md)\n",
                   topo.model.path.c_str());
    }
    http::OpenAiServer http_server(**server, **engine, (*server)->tokenizer(), options);
    if (absl::Status s = http_server.bind(); !s.ok()) return fail_serve(std::string(s.message()));
    std::fprintf(stderr,
                 "muflow serve: model '%s' on http://%s:%d (POST /v1/completions, "
                 "/v1/chat/completions; GET /v1/models, /health, /metrics)%s\n",
                 options.model_name.c_str(), options.host.c_str(), http_server.port(),
                 options.api_key.empty() ? "" : "; API key required");
    std::fflush(stderr);

    // Workers started here that die are started again at their address (after a doubling wait
    // while they keep dying), and the engine takes them back once they answer
    // (--rejoin-interval-ms). Stopped before the engine shuts down.
    std::mutex restart_mu;
    std::condition_variable restart_cv;
    bool restart_stop = false;
    std::thread restarter;
    if (workers && o->rejoin_interval_ms > 0) {
      restarter = std::thread([&] {
        std::unique_lock<std::mutex> lock(restart_mu);
        while (!restart_cv.wait_for(lock, std::chrono::milliseconds(250),
                                    [&] { return restart_stop; })) {
          lock.unlock();
          for (const std::string& line : workers->restart_exited()) {
            std::fprintf(stderr, "muflow serve: %s\n", line.c_str());
          }
          lock.lock();
        }
      });
    }
    auto stop_restarter = [&] {
      {
        std::lock_guard<std::mutex> lock(restart_mu);
        restart_stop = true;
      }
      restart_cv.notify_all();
      if (restarter.joinable()) restarter.join();
    };

    std::atomic<bool> exiting{false};
    std::thread watcher([&signals, &http_server, &exiting, grace = o->shutdown_grace_s] {
      int sig = 0;
      sigwait(&signals, &sig);
      if (exiting.load()) return;  // woken by the exit path below
      std::fprintf(stderr,
                   "\nmuflow serve: %s: no new requests; %lld in flight may finish for %.0f s\n",
                   sig == SIGINT ? "SIGINT" : "SIGTERM",
                   static_cast<long long>(http_server.in_flight()), grace);
      http_server.stop(grace);
    });
    http_server.serve();
    http_server.stop(0.0);
    // Wake the watcher if serve() ended without a signal.
    exiting.store(true);
    pthread_kill(watcher.native_handle(), SIGTERM);
    watcher.join();
    stop_restarter();
    if (absl::Status s = (*engine)->shutdown(); !s.ok())
      return fail_serve(std::string(s.message()));
    std::fprintf(stderr, "muflow serve: stopped\n");
    return 0;
  };
}

}  // namespace muflow::tools
