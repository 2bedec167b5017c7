// `muflow run [TOPOLOGY | --synthetic]`: serves a topology's workload (or the embedded default,
// the shipped KJV model; or the synthetic demo) through its wiring, shows progress, prints
// metrics, each request's prompt and generated text, writes the Chrome trace and optional
// outputs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "actors/server.hpp"
#include "nlohmann/json.hpp"
#include "tools/commands.hpp"
#include "tools/topology_arg.hpp"

namespace muflow::tools {
namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "muflow run: %s\n", what.c_str());
  return 1;
}

// Most requests whose prompt and text are printed (all of them go to --outputs).
constexpr size_t kMaxTextsShown = 32;
// Most requests whose token ids are printed for a model without a tokenizer.
constexpr size_t kMaxIdsShown = 4;

// The prompt of request `r` as text: the workload's text when it gave one, else its ids
// decoded.
std::string prompt_text(const actors::RequestOutput& r,
                        const std::vector<engine::serving::Request>& requests,
                        const engine::model::Tokenizer& tok) {
  if (r.request_id >= 0 && r.request_id < static_cast<int64_t>(requests.size()) &&
      !requests[static_cast<size_t>(r.request_id)].prompt_text.empty()) {
    return requests[static_cast<size_t>(r.request_id)].prompt_text;
  }
  return tok.decode(r.prompt);
}

// Each request's prompt and its decoded continuation, two lines per request:
//   [0] And God said, Let there be
//    -> a man that is ...
void print_texts(const std::vector<actors::RequestOutput>& outputs,
                 const std::vector<engine::serving::Request>& requests,
                 const engine::model::Tokenizer& tok) {
  const size_t show = std::min(outputs.size(), kMaxTextsShown);
  for (size_t i = 0; i < show; ++i) {
    const actors::RequestOutput& r = outputs[i];
    std::printf("[%lld] %s\n -> %s\n", static_cast<long long>(r.request_id),
                prompt_text(r, requests, tok).c_str(), tok.decode(r.output).c_str());
  }
  if (outputs.size() > show) {
    std::printf("... and %zu more requests (--outputs F.jsonl writes every one)\n",
                outputs.size() - show);
  }
}

}  // namespace

Command add_run_command(CLI::App& app) {
  struct Options {
    std::string topology, outputs, trace, record_routing, colocate;
    bool quiet = false, no_trace = false, synthetic = false;
  };
  auto o = std::make_shared<Options>();
  auto* file = app.add_option(
      "topology", o->topology,
      "topology TOML file (default: the embedded default, the shipped KJV model on 2 cpu "
      "devices with built-in text prompts; MUFLOW_MODELS_DIR says where models/ is)");
  app.add_flag("--synthetic", o->synthetic,
               "serve the synthetic demo instead (random-weight Mixtral on 4 cpu devices, "
               "token-id prompts; needs no model files)")
      ->excludes(file);
  app.add_option("--outputs", o->outputs, "write one JSON line per request to this file");
  app.add_option("--trace", o->trace,
                 "Chrome trace output (default: the topology's 'trace', else out/muflow-trace.json)");
  app.add_flag("--quiet", o->quiet, "no progress line and no generated text");
  app.add_option("--colocate", o->colocate,
                 "serve this second topology's model and workload on the same devices at the "
                 "same time (Aurora §6; its placement decides which experts share a device)");
  app.add_flag("--no-trace", o->no_trace, "record no trace (benchmarks)");
  app.add_option("--record-routing", o->record_routing,
                 "write every token's expert choices per block as CSV (replay in sim with "
                 "[router] kind = \"recorded\")");
  return [o]() {
    engine::topology::Topology topo;
    if (o->synthetic) {
      topo = engine::topology::synthetic_demo_topology();
    } else {
      absl::StatusOr<engine::topology::Topology> loaded = load_topology_arg(o->topology);
      if (!loaded.ok()) return fail(std::string(loaded.status().message()));
      topo = std::move(*loaded);
    }
    if (!o->trace.empty()) topo.trace_file = o->trace;
    if (topo.trace_file.empty()) topo.trace_file = "out/muflow-trace.json";
    if (o->no_trace) topo.trace_file.clear();
    topo.routing_record_file = o->record_routing;
    if (!o->quiet) {
      std::fprintf(stderr, "muflow: %s: wiring %s, backend %s, %zu devices, loading model...\n",
                   topo.source.c_str(), topo.wiring.c_str(), topo.backend.c_str(),
                   topo.devices.size());
    }
    absl::StatusOr<std::unique_ptr<actors::Server>> server = actors::Server::create(topo);
    if (!server.ok()) return fail(std::string(server.status().message()));
    absl::StatusOr<std::vector<engine::serving::Request>> requests = (*server)->make_workload();
    if (!requests.ok()) return fail(std::string(requests.status().message()));

    actors::RunCallbacks cb;
    const auto start = std::chrono::steady_clock::now();
    auto last = start - std::chrono::seconds(1);
    if (!o->quiet) {
      cb.on_progress = [start, last](int64_t finished, int64_t total, int64_t tokens) mutable {
        const auto now = std::chrono::steady_clock::now();
        if (now - last < std::chrono::milliseconds(200) && finished < total) return;
        last = now;
        const double s = std::chrono::duration<double>(now - start).count();
        std::fprintf(stderr, "\r  requests %lld/%lld  tokens %lld  %.1f tok/s  %.1fs   ",
                     static_cast<long long>(finished), static_cast<long long>(total),
                     static_cast<long long>(tokens), s > 0 ? tokens / s : 0.0, s);
        if (finished == total) std::fprintf(stderr, "\n");
      };
    }
    absl::StatusOr<actors::RunOutcome> out = absl::InternalError("not run");
    if (!o->colocate.empty()) {
      absl::StatusOr<engine::topology::Topology> other_topo =
          engine::topology::parse_topology_file(o->colocate);
      if (!other_topo.ok()) return fail(std::string(other_topo.status().message()));
      other_topo->trace_file.clear();  // one trace per run: the first model's
      absl::StatusOr<std::unique_ptr<actors::Server>> other =
          actors::Server::create(*other_topo);
      if (!other.ok()) return fail(std::string(other.status().message()));
      absl::StatusOr<std::vector<engine::serving::Request>> theirs = (*other)->make_workload();
      if (!theirs.ok()) return fail(std::string(theirs.status().message()));
      auto both = (*server)->run_colocated(**other, *requests, *theirs);
      if (!both.ok()) return fail(std::string(both.status().message()));
      std::vector<std::string> names;
      for (const auto& d : other_topo->devices) names.push_back(d.name);
      std::printf("== colocated model: %s\n%s\n== model: %s\n", other_topo->source.c_str(),
                  engine::serving::format_metrics_table(both->second.metrics, names).c_str(),
                  topo.source.c_str());
      out = std::move(both->first);
    } else {
      out = (*server)->run(*requests, cb);
    }
    if (!out.ok()) return fail(std::string(out.status().message()));

    std::vector<std::string> names;
    for (const auto& d : topo.devices) names.push_back(d.name);
    std::printf("%s", engine::serving::format_metrics_table(out->metrics, names).c_str());
    if (!topo.trace_file.empty()) std::printf("trace: %s\n", topo.trace_file.c_str());
    const engine::model::Tokenizer* tok = (*server)->tokenizer();
    if (!o->outputs.empty()) {
      const auto parent = std::filesystem::path(o->outputs).parent_path();
      std::error_code ec;
      if (!parent.empty()) std::filesystem::create_directories(parent, ec);
      std::ofstream f(o->outputs);
      if (!f) return fail("cannot write --outputs file '" + o->outputs + "'");
      for (const actors::RequestOutput& r : out->outputs) {
        nlohmann::json j{{"request_id", r.request_id}, {"prompt_ids", r.prompt},
                         {"output_ids", r.output}};
        if (tok) {
          j["prompt_text"] = prompt_text(r, *requests, *tok);
          j["output_text"] = tok->decode(r.output);
        }
        f << j.dump() << "\n";
      }
      f.flush();
      if (!f) return fail("failed writing --outputs file '" + o->outputs + "' (disk full?)");
      std::printf("outputs: %s\n", o->outputs.c_str());
    }
    if (o->quiet || topo.backend == "sim") return 0;  // sim token ids carry no text
    if (tok) {
      print_texts(out->outputs, *requests, *tok);
    } else if (o->outputs.empty()) {
      const size_t show = std::min(out->outputs.size(), kMaxIdsShown);
      for (size_t i = 0; i < show; ++i) {
        const actors::RequestOutput& r = out->outputs[i];
        std::string text;
        for (int32_t t : r.output) text += std::to_string(t) + " ";
        std::printf("request %lld -> %s\n", static_cast<long long>(r.request_id), text.c_str());
      }
    }
    return 0;
  };
}

}  // namespace muflow::tools
