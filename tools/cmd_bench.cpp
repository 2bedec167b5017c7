// `muflow bench`: runs one topology's workload under several wirings and parameter values
// (the cartesian product of every --sweep) with the same seed, and prints one row per run.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "actors/server.hpp"
#include "engine/topology/topology_override.hpp"
#include "tools/commands.hpp"

namespace muflow::tools {
namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "muflow bench: %s\n", what.c_str());
  return 1;
}

struct Sweep {
  std::string key;
  std::vector<std::string> values;
};

struct Row {
  std::vector<std::string> cells;
};

std::string fmt(double v, int decimals = 2) { return absl::StrFormat("%.*f", decimals, v); }

}  // namespace

Command add_bench_command(CLI::App& app) {
  struct Options {
    std::string topology, wirings = "", csv;
    std::vector<std::string> sweeps;
  };
  auto o = std::make_shared<Options>();
  app.add_option("topology", o->topology, "topology TOML file")->required();
  app.add_option("--wirings", o->wirings,
                 "comma-separated wirings to compare (default: the topology's)");
  app.add_option("--sweep", o->sweeps,
                 "KEY=v1,v2,... (repeatable; keys: " +
                     absl::StrJoin(engine::topology::topology_override_keys(), ", ") + ")");
  app.add_option("--csv", o->csv, "also write the table as CSV");
  return [o]() {
    absl::StatusOr<engine::topology::Topology> base =
        engine::topology::parse_topology_file(o->topology);
    if (!base.ok()) return fail(std::string(base.status().message()));
    std::vector<std::string> wirings =
        o->wirings.empty() ? std::vector<std::string>{base->wiring}
                           : std::vector<std::string>(absl::StrSplit(o->wirings, ','));
    std::vector<Sweep> sweeps;
    for (const std::string& s : o->sweeps) {
      std::vector<std::string> kv = absl::StrSplit(s, absl::MaxSplits('=', 1));
      if (kv.size() != 2 || kv[1].empty()) return fail("--sweep '" + s + "': expected KEY=v1,v2");
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
            return fail(std::string(st.message()));
          }
          row.cells.push_back(v);
        }
        std::fprintf(stderr, "muflow bench: run %zu/%zu (%s)\n", rows.size() + 1,
                     combos * wirings.size(), absl::StrJoin(row.cells, " ").c_str());
        absl::StatusOr<std::unique_ptr<actors::Server>> server = actors::Server::create(t);
        if (!server.ok()) return fail(std::string(server.status().message()));
        absl::StatusOr<std::vector<engine::serving::Request>> requests = (*server)->make_workload();
        if (!requests.ok()) return fail(std::string(requests.status().message()));
        absl::StatusOr<actors::RunOutcome> out = (*server)->run(*requests);
        if (!out.ok()) return fail(std::string(out.status().message()));
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
    std::vector<size_t> width(header.size());
    for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
    for (const Row& r : rows) {
      for (size_t i = 0; i < r.cells.size(); ++i) width[i] = std::max(width[i], r.cells[i].size());
    }
    auto print = [&](const std::vector<std::string>& cells) {
      for (size_t i = 0; i < cells.size(); ++i) {
        std::printf("%s%*s", i ? "  " : "", static_cast<int>(width[i]), cells[i].c_str());
      }
      std::printf("\n");
    };
    print(header);
    for (const Row& r : rows) print(r.cells);
    if (!o->csv.empty()) {
      const auto parent = std::filesystem::path(o->csv).parent_path();
      std::error_code ec;
      if (!parent.empty()) std::filesystem::create_directories(parent, ec);
      std::ofstream f(o->csv);
      if (!f) return fail("cannot write --csv file '" + o->csv + "'");
      f << absl::StrJoin(header, ",") << "\n";
      for (const Row& r : rows) f << absl::StrJoin(r.cells, ",") << "\n";
      f.flush();
      if (!f) return fail("failed writing --csv file '" + o->csv + "' (disk full?)");
      std::printf("csv: %s\n", o->csv.c_str());
    }
    return 0;
  };
}

}  // namespace muflow::tools
