// `muflow bench`: runs one topology's workload under several wirings and parameter values
// (the cartesian product of every --sweep) with the same seed, and prints one row per run.
// With --url, the workload goes over HTTP to a running OpenAI-compatible server instead
// (http/client/), reported like `vllm bench serve`.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "actors/server.hpp"
#include "engine/topology/topology_override.hpp"
#include "http/client/base_url.hpp"
#include "http/client/bench_metrics.hpp"
#include "http/client/http_load.hpp"
#include "http/client/openai_stream_client.hpp"
#include "http/client/topology_requests.hpp"
#include "nlohmann/json.hpp"
#include "tools/commands.hpp"

namespace muflow::tools {
namespace {

int fail_bench(const std::string& what) { return command_failed("bench", what); }

struct Sweep {
  std::string key;
  std::vector<std::string> values;
};

struct Row {
  std::vector<std::string> cells;
};

std::string fmt(double v, int decimals = 2) { return absl::StrFormat("%.*f", decimals, v); }

struct Options {
  std::string topology, wirings = "", csv;
  std::vector<std::string> sweeps;
  bool json = false;
  // --url: the workload goes to a running server.
  std::string url, api_key, model, results;
  int64_t max_concurrency = 0;
  double timeout_s = 60.0;
};

int usage(const std::string& what) {
  std::fprintf(stderr, "muflow bench: %s\n", what.c_str());
  return 2;
}

absl::StatusOr<std::vector<Sweep>> parse_sweeps(const std::vector<std::string>& specs) {
  std::vector<Sweep> sweeps;
  for (const std::string& s : specs) {
    std::vector<std::string> kv = absl::StrSplit(s, absl::MaxSplits('=', 1));
    if (kv.size() != 2 || kv[1].empty()) {
      return absl::InvalidArgumentError("--sweep '" + s + "': expected KEY=v1,v2");
    }
    sweeps.push_back({kv[0], absl::StrSplit(kv[1], ',')});
  }
  return sweeps;
}

// The table as a JSON array of objects, one per row, keys in column order (numeric cells as
// numbers).
nlohmann::ordered_json rows_json(const std::vector<std::string>& header,
                                 const std::vector<Row>& rows) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Row& r : rows) {
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    for (size_t i = 0; i < header.size() && i < r.cells.size(); ++i) {
      double v = 0.0;
      if (absl::SimpleAtod(r.cells[i], &v) && std::isfinite(v)) {
        o[header[i]] = v;
      } else {
        o[header[i]] = r.cells[i];
      }
    }
    out.push_back(std::move(o));
  }
  return out;
}

// Writes `header` and `rows` as CSV to `path` (creating its folder); prints "csv: PATH".
int write_csv(const std::string& path, const std::vector<std::string>& header,
              const std::vector<Row>& rows, FILE* note) {
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::ofstream f(path);
  if (!f) return fail_bench("cannot write --csv file '" + path + "'");
  f << absl::StrJoin(header, ",") << "\n";
  for (const Row& r : rows) f << absl::StrJoin(r.cells, ",") << "\n";
  f.flush();
  if (!f) return fail_bench("failed writing --csv file '" + path + "' (disk full?)");
  std::fprintf(note, "csv: %s\n", path.c_str());
  return 0;
}

// A one-line description of a workload for the report.
std::string describe_workload(const engine::topology::WorkloadSpec& w, size_t num_requests) {
  if (w.kind == "poisson") {
    return absl::StrFormat(
        "poisson, %g req/s, %d requests, input %d-%d, output %d-%d tokens, seed %d", w.rate_per_s,
        num_requests, w.input_min, w.input_max, w.output_min, w.output_max, w.seed);
  }
  if (w.kind == "trace") {
    return absl::StrFormat("trace %s, time_scale %g, %d requests, seed %d",
                           std::filesystem::path(w.trace_file).filename().string(), w.time_scale,
                           num_requests, w.seed);
  }
  return absl::StrFormat("%s, %d requests, arrival 0", w.kind, num_requests);
}

// `muflow bench TOPOLOGY --url URL`: the topology's workload sent to a running server.
int run_url_bench(const Options& o) {
  if (!o.wirings.empty()) {
    return usage("--wirings selects in-process wirings; with --url the server's own is used");
  }
  absl::StatusOr<http::client::BaseUrl> url = http::client::parse_base_url(o.url);
  if (!url.ok()) return usage("--url: " + std::string(url.status().message()));
  if (!(o.timeout_s > 0.0)) return usage("--timeout must be > 0 seconds");
  absl::StatusOr<std::vector<Sweep>> sweeps = parse_sweeps(o.sweeps);
  if (!sweeps.ok()) return usage(std::string(sweeps.status().message()));
  for (const Sweep& s : *sweeps) {
    if (!absl::StartsWith(s.key, "workload.")) {
      return usage("--sweep " + s.key +
                   ": with --url only workload.* keys apply (the server's settings are fixed "
                   "when it starts)");
    }
  }
  absl::StatusOr<engine::topology::Topology> base =
      engine::topology::parse_topology_file(o.topology);
  if (!base.ok()) return fail_bench(std::string(base.status().message()));

  http::client::LoadOptions load;
  load.client.api_key = o.api_key;
  for (const char* var : {"MUFLOW_API_KEY", "OPENAI_API_KEY"}) {  // `muflow serve`'s, vLLM's
    const char* env = std::getenv(var);
    if (load.client.api_key.empty() && env != nullptr) load.client.api_key = env;
  }
  load.client.read_timeout_s = o.timeout_s;
  load.max_concurrency = o.max_concurrency;
  load.temperature = base->sampling.temperature;

  // Fail fast when the server cannot be reached; name the model when none was given.
  {
    absl::StatusOr<std::unique_ptr<http::client::OpenAiStreamClient>> probe =
        http::client::OpenAiStreamClient::create(*url, load.client,
                                                 std::chrono::steady_clock::now());
    if (!probe.ok()) return fail_bench(std::string(probe.status().message()));
    absl::StatusOr<std::vector<std::string>> models = (*probe)->list_models();
    if (o.model.empty()) {
      if (!models.ok()) return fail_bench(std::string(models.status().message()));
      if (models->empty()) {
        return fail_bench(url->text() + "/v1/models lists no model; give --model NAME");
      }
      load.model = models->front();
    } else {
      if (!models.ok() &&
          (absl::IsUnavailable(models.status()) || absl::IsUnauthenticated(models.status()))) {
        return fail_bench(std::string(models.status().message()));
      }
      load.model = o.model;
    }
  }

  std::ofstream results;
  if (!o.results.empty()) {
    const auto parent = std::filesystem::path(o.results).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    results.open(o.results);
    if (!results) return fail_bench("cannot write --results file '" + o.results + "'");
  }

  std::vector<std::string> header;
  for (const Sweep& s : *sweeps) header.push_back(s.key);
  for (const char* h :
       {"ok", "failed", "duration_s", "req/s", "out_tok/s", "total_tok/s", "ttft_mean_ms",
        "ttft_p50_ms", "ttft_p99_ms", "tpot_mean_ms", "tpot_p50_ms", "tpot_p99_ms", "itl_mean_ms",
        "itl_p50_ms", "itl_p99_ms", "e2el_mean_ms", "e2el_p50_ms", "e2el_p99_ms"}) {
    header.push_back(h);
  }
  std::vector<Row> rows;
  nlohmann::json runs = nlohmann::json::array();
  size_t combos = 1;
  for (const Sweep& s : *sweeps) combos *= s.values.size();
  bool any_success = false;
  std::string first_error;
  for (size_t c = 0; c < combos; ++c) {
    engine::topology::Topology t = *base;
    Row row;
    nlohmann::json sweep_values = nlohmann::json::object();
    size_t rest = c;
    for (const Sweep& s : *sweeps) {
      const std::string& v = s.values[rest % s.values.size()];
      rest /= s.values.size();
      if (absl::Status st = engine::topology::apply_topology_override(t, s.key, v); !st.ok()) {
        return fail_bench(std::string(st.message()));
      }
      row.cells.push_back(v);
      sweep_values[s.key] = v;
    }
    absl::StatusOr<std::vector<engine::serving::Request>> requests =
        http::client::make_topology_requests(t);
    if (!requests.ok()) return fail_bench(std::string(requests.status().message()));
    if (requests->empty()) return fail_bench(o.topology + ": the workload has no requests");
    std::vector<std::string> settings;
    for (size_t k = 0; k < sweeps->size(); ++k) {
      settings.push_back((*sweeps)[k].key + "=" + row.cells[k]);
    }
    std::fprintf(stderr, "muflow bench: run %zu/%zu%s: %zu requests to %s (model %s)\n", c + 1,
                 combos,
                 settings.empty() ? "" : (" (" + absl::StrJoin(settings, " ") + ")").c_str(),
                 requests->size(), url->text().c_str(), load.model.c_str());
    const size_t run_index = c;
    http::client::RecordSink sink;
    if (results.is_open()) {
      sink = [&results, run_index](const http::client::RequestRecord& rec) {
        nlohmann::json j = http::client::request_record_json(rec);
        j["run"] = run_index;
        results << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        results.flush();  // a run cut short keeps what finished
      };
    }
    absl::StatusOr<http::client::LoadRun> run =
        http::client::run_http_load(*url, *requests, load, sink);
    if (!run.ok()) return fail_bench(std::string(run.status().message()));
    const http::client::BenchMetrics m = http::client::summarize_http_load(*run);
    any_success = any_success || m.num_successful > 0;
    if (first_error.empty() && !m.failures.empty()) first_error = m.failures.front().example;
    if (!o.json) {
      http::client::BenchReportHeader h;
      h.url = url->text();
      h.model = load.model;
      h.max_concurrency = o.max_concurrency;
      h.workload = describe_workload(t.workload, requests->size());
      if (!settings.empty()) h.workload += " [" + absl::StrJoin(settings, " ") + "]";
      const std::string text = http::client::format_bench_report(m, h);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    }
    row.cells.push_back(std::to_string(m.num_successful));
    row.cells.push_back(std::to_string(m.num_failed));
    row.cells.push_back(fmt(m.duration_s, 3));
    for (double v : {m.request_throughput, m.output_token_throughput, m.total_token_throughput}) {
      row.cells.push_back(fmt(v));
    }
    for (const engine::serving::LatencyStats* s : {&m.ttft, &m.tpot, &m.itl, &m.e2el}) {
      for (double v : {s->mean_ms, s->p50_ms, s->p99_ms}) row.cells.push_back(fmt(v));
    }
    rows.push_back(std::move(row));
    nlohmann::json r = http::client::bench_metrics_json(m);
    r["sweep"] = sweep_values;
    r["workload"] = describe_workload(t.workload, requests->size());
    runs.push_back(std::move(r));
  }
  if (o.json) {
    nlohmann::json out = {{"url", url->text()},
                          {"model", load.model},
                          {"max_concurrency", o.max_concurrency},
                          {"runs", runs}};
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  if (!o.csv.empty()) {
    if (int rc = write_csv(o.csv, header, rows, o.json ? stderr : stdout); rc != 0) return rc;
  }
  if (!any_success) return fail_bench("every request failed; first error: " + first_error);
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  app.add_option("topology", o->topology, "topology TOML file")->required();
  app.add_option("--wirings", o->wirings,
                 "comma-separated wirings to compare (default: the topology's)");
  app.add_option("--sweep", o->sweeps,
                 "KEY=v1,v2,... (repeatable; keys: " +
                     absl::StrJoin(engine::topology::topology_override_keys(), ", ") + ")");
  app.add_option("--csv", o->csv, "also write the table as CSV");
  app.add_flag("--json", o->json, "print the results as JSON instead of the table / report");
  app.add_option("--url", o->url,
                 "send the topology's workload to a running OpenAI-compatible server "
                 "(http://HOST:PORT) instead of serving it in-process");
  app.add_option("--api-key", o->api_key,
                 "with --url: sent as 'Authorization: Bearer KEY' (default: $MUFLOW_API_KEY, else "
                 "$OPENAI_API_KEY)");
  app.add_option("--model", o->model,
                 "with --url: the requests' model name (default: the first of GET /v1/models)");
  app.add_option("--max-concurrency", o->max_concurrency,
                 "with --url: most requests in flight at once (0 = no cap)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--results", o->results,
                 "with --url: write one JSON line per request as it finishes");
  app.add_option("--timeout", o->timeout_s,
                 "with --url: seconds without a byte from the server before a request fails");
  CLI::App* cli = &app;  // outlives the returned command (owned by main's app)
  return [o, cli]() {
    if (!o->url.empty()) return run_url_bench(*o);
    for (const char* only_url :
         {"--api-key", "--model", "--max-concurrency", "--results", "--timeout"}) {
      if (cli->count(only_url) > 0) return usage(std::string(only_url) + " needs --url");
    }
    absl::StatusOr<engine::topology::Topology> base =
        engine::topology::parse_topology_file(o->topology);
    if (!base.ok()) return fail_bench(std::string(base.status().message()));
    std::vector<std::string> wirings =
        o->wirings.empty() ? std::vector<std::string>{base->wiring}
                           : std::vector<std::string>(absl::StrSplit(o->wirings, ','));
    std::vector<Sweep> sweeps;
    for (const std::string& s : o->sweeps) {
      std::vector<std::string> kv = absl::StrSplit(s, absl::MaxSplits('=', 1));
      if (kv.size() != 2 || kv[1].empty())
        return fail_bench("--sweep '" + s + "': expected KEY=v1,v2");
      sweeps.push_back({kv[0], absl::StrSplit(kv[1], ',')});
    }
    std::vector<std::string> header = {"wiring"};
    for (const Sweep& s : sweeps) header.push_back(s.key);
    for (const char* h :
         {"tok/s",        "load_tok/s",   "in_req/s",     "done_req/s",     "ttft_mean_ms",
          "ttft_p50_ms",  "ttft_p99_ms",  "itl_mean_ms",  "itl_p50_ms",     "itl_p99_ms",
          "busy_pct",     "idle_pct",     "a2a_s",        "a2a_bound_s",    "balance",
          "moe_layer_ms", "moe_idle_pct", "moved_tokens", "expert_fetches", "remote_rows_pct"}) {
      header.push_back(h);
    }
    std::vector<Row> rows;
    // Cartesian product of the sweeps, wirings outermost.
    size_t combos = 1;
    for (const Sweep& s : sweeps) combos *= s.values.size();
    for (const std::string& wiring : wirings) {
      for (size_t c = 0; c < combos; ++c) {
        engine::topology::Topology t = *base;
        t.wiring = wiring;
        t.trace_file.clear();  // benchmarks record no trace
        Row row{{wiring}};
        size_t rest = c;
        for (const Sweep& s : sweeps) {
          const std::string& v = s.values[rest % s.values.size()];
          rest /= s.values.size();
          if (absl::Status st = engine::topology::apply_topology_override(t, s.key, v); !st.ok()) {
            return fail_bench(std::string(st.message()));
          }
          row.cells.push_back(v);
        }
        std::fprintf(stderr, "muflow bench: run %zu/%zu (%s)\n", rows.size() + 1,
                     combos * wirings.size(), absl::StrJoin(row.cells, " ").c_str());
        absl::StatusOr<std::unique_ptr<actors::Server>> server = actors::Server::create(t);
        if (!server.ok()) return fail_bench(std::string(server.status().message()));
        absl::StatusOr<std::vector<engine::serving::Request>> requests = (*server)->make_workload();
        if (!requests.ok()) return fail_bench(std::string(requests.status().message()));
        absl::StatusOr<actors::RunOutcome> out = (*server)->run(*requests);
        if (!out.ok()) return fail_bench(std::string(out.status().message()));
        const engine::serving::RunMetrics& m = out->metrics;
        const double busy =
            m.device_busy_pct.empty()
                ? 0.0
                : std::accumulate(m.device_busy_pct.begin(), m.device_busy_pct.end(), 0.0) /
                      static_cast<double>(m.device_busy_pct.size());
        for (double v : {m.output_tokens_per_s, m.load_output_tokens_per_s, m.load_arrivals_per_s,
                         m.load_completions_per_s, m.ttft.mean_ms, m.ttft.p50_ms, m.ttft.p99_ms,
                         m.itl.mean_ms, m.itl.p50_ms, m.itl.p99_ms, busy, 100.0 - busy}) {
          row.cells.push_back(fmt(v));
        }
        row.cells.push_back(fmt(m.all_to_all_s, 4));
        row.cells.push_back(fmt(m.all_to_all_bound_s, 4));
        row.cells.push_back(fmt(m.moe_balance, 3));
        row.cells.push_back(fmt(m.moe_layer.mean_ms, 3));
        row.cells.push_back(fmt(m.moe_idle_pct));
        row.cells.push_back(std::to_string(m.tokens_rebalanced));
        row.cells.push_back(std::to_string(m.expert_fetches));
        row.cells.push_back(fmt(m.remote_rows_pct()));
        rows.push_back(std::move(row));
      }
    }
    if (o->json) {
      std::printf("%s\n", rows_json(header, rows)
                              .dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
                              .c_str());
    } else {
      std::vector<size_t> width(header.size());
      for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
      for (const Row& r : rows) {
        for (size_t i = 0; i < r.cells.size(); ++i) {
          width[i] = std::max(width[i], r.cells[i].size());
        }
      }
      auto print = [&](const std::vector<std::string>& cells) {
        for (size_t i = 0; i < cells.size(); ++i) {
          std::printf("%s%*s", i ? "  " : "", static_cast<int>(width[i]), cells[i].c_str());
        }
        std::printf("\n");
      };
      print(header);
      for (const Row& r : rows) print(r.cells);
    }
    if (!o->csv.empty()) {
      if (int rc = write_csv(o->csv, header, rows, o->json ? stderr : stdout); rc != 0) return rc;
    }
    return 0;
  };
}

}  // namespace muflow::tools
