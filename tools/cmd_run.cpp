// `muflow run [TOPOLOGY | --synthetic]`: serves a topology's workload (or the embedded default,
// the shipped KJV model; or the synthetic demo) through its wiring, shows progress, prints
// metrics, each request's prompt and generated text, writes the Chrome trace and optional
// outputs.
//
// Reliability (issue #15): every output path is opened (or probed) before the model loads;
// `--outputs` gets each request's line as soon as it finishes; SIGINT / SIGTERM cancel the
// unfinished requests (polled by Server::run through RunCallbacks::stop_requested, the same on
// the cpu backend's worker threads and the sim's single-threaded virtual clock), so the run
// still prints its metrics and writes its trace, then exits 128 + the signal number.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_format.h"
#include "actors/cluster/worker_launcher.hpp"
#include "actors/server.hpp"
#include "tools/cluster_launch.hpp"
#include "tools/commands.hpp"
#include "tools/outputs_writer.hpp"
#include "tools/topology_arg.hpp"

namespace muflow::tools {
namespace {

int fail_run(const std::string& what) { return command_failed("run", what); }

// Most requests whose prompt and text are printed (all of them go to --outputs).
constexpr size_t kMaxTextsShown = 32;
// Most requests whose token ids are printed for a model without a tokenizer.
constexpr size_t kMaxIdsShown = 4;

// Each request's prompt and its decoded continuation, two lines per request:
//   [0] And God said, Let there be
//    -> a man that is ...
void print_texts(const std::vector<actors::RequestOutput>& outputs,
                 const engine::model::Tokenizer& tok) {
  const size_t show = std::min(outputs.size(), kMaxTextsShown);
  for (size_t i = 0; i < show; ++i) {
    const actors::RequestOutput& r = outputs[i];
    std::printf("[%lld] %s\n -> %s\n", static_cast<long long>(r.request_id),
                prompt_text(r, tok).c_str(), tok.decode(r.output).c_str());
  }
  if (outputs.size() > show) {
    std::printf("... and %zu more requests (--outputs F.jsonl writes every one)\n",
                outputs.size() - show);
  }
}

// The signal that asked the run to stop (SIGINT, SIGTERM), or 0. Set by the handler; read by
// Server::run's host thread (lock-free, so async-signal-safe).
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int sig) { g_stop_signal.store(sig); }

// Routes SIGINT and SIGTERM to g_stop_signal while alive, restoring the previous handlers
// after. SA_RESETHAND: a second signal of the same kind gets the default action (ends the
// process at once), so an impatient user can always get out.
class StopSignals {
 public:
  StopSignals() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

// "cannot create folder 'D' for FLAG file 'P': REASON", or nothing when `path`'s folder
// exists or was created.
std::optional<std::string> make_parent(const std::string& path, const std::string& what) {
  const auto parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) return std::nullopt;
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (!ec) return std::nullopt;
  return "cannot create folder '" + parent.string() + "' for " + what + " '" + path +
         "': " + ec.message();
}

// Checks, before any work, that `path` (a file written whole at the end of the run: the trace,
// the routing record) can be written: creates its folder, opens it for writing without
// truncating an existing file, and removes it again when the check created it (a run that dies
// leaves no empty file). The error names the path and the OS reason.
std::optional<std::string> probe_writable(const std::string& path, const std::string& what) {
  if (auto err = make_parent(path, what)) return err;
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  errno = 0;
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f) return "cannot write " + what + " '" + path + "': " + std::strerror(errno);
  std::fclose(f);
  if (!existed) std::filesystem::remove(path, ec);
  return std::nullopt;
}

}  // namespace

Command add_run_command(CLI::App& app) {
  struct Options {
    std::string topology, outputs, trace, record_routing, colocate;
    bool quiet = false, no_trace = false, synthetic = false, spawn_workers = false;
    int64_t heartbeat_timeout_ms =
        actors::cluster::ClusterDriverOptions{}.heartbeat_timeout.count();
    int64_t max_message_mib = kDefaultMaxMessageMib;
    int64_t trace_max_events = 1'000'000;
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
  app.add_option("--outputs", o->outputs,
                 "write one JSON line per request to this file, as each request finishes");
  app.add_option(
      "--trace", o->trace,
      "Chrome trace output (default: the topology's 'trace', else out/muflow-trace.json)");
  app.add_option("--trace-max-events", o->trace_max_events,
                 "most events the trace keeps (default 1000000; later ones are dropped, with a "
                 "warning; each costs a few hundred bytes of memory)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--quiet", o->quiet, "no progress line and no generated text");
  app.add_option("--colocate", o->colocate,
                 "serve this second topology's model and workload on the same devices at the "
                 "same time (Aurora §6; its placement decides which experts share a device)");
  app.add_flag("--no-trace", o->no_trace, "record no trace (benchmarks)");
  app.add_flag("--spawn-workers", o->spawn_workers,
               "start the topology's [[cluster.workers]] here as loopback `muflow worker` "
               "processes (port 0: any free port), and stop them after the run; without a "
               "cluster token ($MUFLOW_CLUSTER_TOKEN, [cluster] token_file) a random one is "
               "made for them");
  add_heartbeat_option(app, &o->heartbeat_timeout_ms);
  add_max_message_option(app, &o->max_message_mib);
  app.add_option("--record-routing", o->record_routing,
                 "write every token's expert choices per block as CSV (replay in sim with "
                 "[router] kind = \"recorded\")");
  return [o]() {
    engine::topology::Topology topo;
    if (o->synthetic) {
      topo = engine::topology::synthetic_demo_topology();
    } else {
      absl::StatusOr<engine::topology::Topology> loaded = load_topology_arg(o->topology);
      if (!loaded.ok()) return fail_run(std::string(loaded.status().message()));
      topo = std::move(*loaded);
    }
    if (!o->trace.empty()) topo.trace_file = o->trace;
    if (topo.trace_file.empty()) topo.trace_file = "out/muflow-trace.json";
    if (o->no_trace) topo.trace_file.clear();
    topo.routing_record_file = o->record_routing;
    std::optional<engine::topology::Topology> other_topo;
    if (!o->colocate.empty()) {
      absl::StatusOr<engine::topology::Topology> parsed =
          engine::topology::parse_topology_file(o->colocate);
      if (!parsed.ok()) return fail_run(std::string(parsed.status().message()));
      other_topo = std::move(*parsed);
      other_topo->trace_file.clear();  // one trace per run: the first model's
      other_topo->routing_record_file.clear();
    }

    // Every output path before any work: a run must not fail at its end for a path.
    std::unique_ptr<OutputsWriter> outputs;
    if (!o->outputs.empty()) {
      if (auto err = make_parent(o->outputs, "--outputs file")) return fail_run(*err);
      if (auto err = OutputsWriter::open(o->outputs, &outputs)) return fail_run(*err);
    }
    if (!topo.trace_file.empty()) {
      if (auto err = probe_writable(topo.trace_file, "trace")) return fail_run(*err);
    }
    if (!topo.routing_record_file.empty()) {
      if (auto err = probe_writable(topo.routing_record_file, "--record-routing file")) {
        return fail_run(*err);
      }
    }

    if (!o->quiet) {
      std::fprintf(stderr, "muflow: %s: wiring %s, backend %s, %zu devices, loading model...\n",
                   topo.source.c_str(), topo.wiring.c_str(), topo.backend.c_str(),
                   topo.devices.size());
    }
    // Worker processes (#18): started here with --spawn-workers, joined by the driver.
    std::unique_ptr<actors::cluster::LaunchedWorkers> workers;
    if (o->spawn_workers) {
      if (topo.workers.empty()) {
        return fail_run("--spawn-workers: " + topo.source + " lists no [[cluster.workers]]");
      }
      absl::StatusOr<std::unique_ptr<actors::cluster::LaunchedWorkers>> launched =
          spawn_workers(topo, o->quiet, "muflow", o->max_message_mib);
      if (!launched.ok()) return fail_run(std::string(launched.status().message()));
      workers = std::move(*launched);
    }
    absl::StatusOr<std::unique_ptr<actors::Server>> server = actors::Server::create(topo);
    if (!server.ok()) return fail_run(std::string(server.status().message()));
    actors::cluster::ClusterDriverOptions cluster;
    cluster.heartbeat_timeout = std::chrono::milliseconds(o->heartbeat_timeout_ms);
    cluster.max_message_bytes = o->max_message_mib << 20;
    if (absl::Status s = attach_workers(**server, topo, cluster); !s.ok()) {
      return fail_run(std::string(s.message()));
    }
    (*server)->set_trace_max_events(o->trace_max_events);
    if (const auto m = (*server)->model(); m && !o->quiet) {
      // Which GEMM path this CPU got (issue #16): bf16 weights compute in bf16 only where the
      // CPU has native bf16; `[model] compute` forces either.
      std::fprintf(stderr,
                   "muflow: %s weights, GEMMs in %s on the %s kernel, %lld thread(s) per device "
                   "(CPU %s native bf16; [model] compute = \"%s\")\n",
                   m->weights_dtype(), m->compute_dtype(), m->gemm_kernel(),
                   static_cast<long long>((*server)->gemm_threads_per_device()),
                   kernels::cpu::cpu_has_native_bf16() ? "has" : "lacks",
                   topo.model.compute.c_str());
    }
    if (const actors::SimSetup* sim = (*server)->sim_setup(); sim && !o->quiet) {
      // What the simulated times include (issue #19): the network model, host overheads and
      // whether the expert kernels were calibrated.
      const engine::topology::StepOverheads& base = topo.cost.overheads;
      std::fprintf(stderr,
                   "muflow: sim network %s; step overheads %.1f us per stage run + %.1f us per "
                   "scheduler grant (+%.1f us per attention run, +%.1f us per expert run)%s\n",
                   topo.network.model.c_str(), base.stage_us, base.scheduler_us, base.attention_us,
                   base.expert_us,
                   topo.cost.kinds.empty() ? "" : " (per-kind overrides in [cost.kinds])");
      if (sim->measured) {
        std::fprintf(stderr,
                     "muflow: stage times of device kind %s from measured kernels %s (+%.1f us "
                     "host time per stage run)\n",
                     sim->measured->kind().c_str(), topo.cost.kernels.c_str(),
                     sim->measured->stage_overhead_s() * 1e6);
        using K = kernels::sim::MeasuredKernels::RunKind;
        const double sa = sim->measured->run_spread(K::kAttention);
        const double se = sim->measured->run_spread(K::kExpert);
        const double ss = sim->measured->run_spread(K::kSampler);
        if (sa > 0 || se > 0 || ss > 0) {
          std::fprintf(
              stderr, "muflow: run spread (log) attention %.3f, expert %.3f, sampler %.3f; %s\n",
              sa, se, ss,
              topo.cost.spread_seed == 0
                  ? "off ([cost] spread_seed = 0: every run its mean)"
                  : absl::StrFormat("drawn with [cost] spread_seed = %d", topo.cost.spread_seed)
                        .c_str());
        }
      }
      if (sim->calibration) {
        std::fprintf(stderr,
                     "muflow: expert FFN times of %s calibrated from %s: %lld rows, mean relative "
                     "error %.1f%%, max %.1f%%\n",
                     topo.cost.expert_ffn->kind.c_str(), topo.cost.expert_ffn->file.c_str(),
                     static_cast<long long>(sim->calibration->num_samples),
                     100.0 * sim->calibration->mean_rel_error,
                     100.0 * sim->calibration->max_rel_error);
      }
    }
    // The workload as a source: each request is made when it arrives, so a long Poisson load
    // costs memory for the requests in flight only.
    absl::StatusOr<engine::serving::RequestSourcePtr> source = (*server)->make_workload_source();
    if (!source.ok()) return fail_run(std::string(source.status().message()));
    const engine::model::Tokenizer* tok = (*server)->tokenizer();
    const int64_t num_offered = (*source)->remaining();

    actors::RunCallbacks cb;
    // The progress line is open (no newline yet); read after the run.
    auto progress_open = std::make_shared<bool>(false);
    const auto start = std::chrono::steady_clock::now();
    if (!o->quiet && !other_topo) {
      // On a terminal one line rewritten 5 times a second; into a file or a pipe (a CI log) the
      // first line, one every 10 s and the last, each ending in a newline. The sim shows its
      // virtual clock: a rate per wall second would be the simulator's speed, not the run's.
      const bool terminal = ::isatty(::fileno(stderr)) != 0;
      const bool sim = topo.backend == "sim";
      const std::chrono::steady_clock::duration every =
          terminal ? std::chrono::milliseconds(200) : std::chrono::seconds(10);
      cb.on_progress = [start, last = start - every, every, progress_open, terminal, sim](
                           int64_t finished, int64_t total, int64_t tokens,
                           double clock_s) mutable {
        const auto now = std::chrono::steady_clock::now();
        if (now - last < every && finished < total) return;
        last = now;
        const double s = std::chrono::duration<double>(now - start).count();
        const std::string line =
            sim ? absl::StrFormat("  requests %d/%d  tokens %d  simulated %.3f s  (wall %.1f s)",
                                  finished, total, tokens, clock_s, s)
                : absl::StrFormat("  requests %d/%d  tokens %d  %.1f tok/s  %.1f s", finished,
                                  total, tokens, s > 0 ? tokens / s : 0.0, s);
        if (terminal) {
          std::fprintf(stderr, "\r%s   ", line.c_str());
          *progress_open = finished < total;
          if (finished == total) std::fprintf(stderr, "\n");
        } else {
          std::fprintf(stderr, "%s\n", line.c_str());
        }
      };
    }
    // Outputs are kept to the end only to be printed (cpu, not --quiet); otherwise each goes
    // to --outputs as it finishes and is forgotten (memory flat over long runs).
    const bool print_outputs = !o->quiet && topo.backend != "sim";
    cb.keep_outputs = print_outputs || other_topo.has_value();
    auto num_completed = std::make_shared<int64_t>(0);  // finished other than cancelled
    if (outputs) outputs->set_text(tok);
    cb.on_finish = [w = outputs.get(), num_completed](const actors::RequestOutput& r) {
      if (r.finish_reason != actors::FinishReason::kCancelled) ++*num_completed;
      if (w) w->write(r);
    };
    // SIGINT / SIGTERM, or an --outputs file that stopped taking lines: cancel what is left.
    cb.stop_requested = [w = outputs.get()] {
      return g_stop_signal.load() != 0 || (w && w->failed());
    };
    g_stop_signal.store(0);
    StopSignals signals;  // from here to the end of the run (a second signal ends it at once)

    absl::StatusOr<actors::RunOutcome> out = absl::InternalError("not run");
    if (other_topo) {
      absl::StatusOr<std::unique_ptr<actors::Server>> other = actors::Server::create(*other_topo);
      if (!other.ok()) return fail_run(std::string(other.status().message()));
      absl::StatusOr<std::vector<engine::serving::Request>> theirs = (*other)->make_workload();
      if (!theirs.ok()) return fail_run(std::string(theirs.status().message()));
      absl::StatusOr<std::vector<engine::serving::Request>> mine = (*server)->make_workload();
      if (!mine.ok()) return fail_run(std::string(mine.status().message()));
      auto both = (*server)->run_colocated(**other, std::move(*mine), std::move(*theirs), cb);
      if (!both.ok()) return fail_run(std::string(both.status().message()));
      std::vector<std::string> names;
      for (const auto& d : other_topo->devices) names.push_back(d.name);
      std::printf("== colocated model: %s\n%s\n== model: %s\n", other_topo->source.c_str(),
                  engine::serving::format_metrics_table(both->second.metrics, names).c_str(),
                  topo.source.c_str());
      out = std::move(both->first);
    } else {
      out = (*server)->run(std::move(*source), cb);
    }
    if (*progress_open) std::fprintf(stderr, "\n");
    if (outputs) outputs->close();  // every finished request's line is on disk now
    if (!out.ok()) {
      std::string msg(out.status().message());
      if (outputs) {
        msg += " (the " + std::to_string(outputs->num_lines()) +
               " requests that finished are in '" + outputs->path() + "')";
      }
      return fail_run(msg);
    }

    std::vector<std::string> names;
    for (const auto& d : topo.devices) names.push_back(d.name);
    std::printf("%s", engine::serving::format_metrics_table(out->metrics, names).c_str());
    if (!topo.trace_file.empty()) std::printf("trace: %s\n", topo.trace_file.c_str());
    for (const actors::RunRecovery& r : out->recoveries) {  // #18: workers lost and survived
      std::printf(
          "recovered: %s; detected at %.3f s, resumed at %.3f s, first token after it "
          "at %.3f s (%.0f ms after detection), %lld requests re-admitted\n",
          r.lost.c_str(), r.detected_s, r.resumed_s, r.first_token_s,
          r.first_token_s >= 0 ? 1e3 * (r.first_token_s - r.detected_s) : -1.0,
          static_cast<long long>(r.readmitted_requests));
    }
    if (!out->trace_warning.empty()) {
      std::fprintf(stderr, "muflow run: warning: %s (or --no-trace)\n", out->trace_warning.c_str());
    }
    if (outputs) std::printf("outputs: %s\n", outputs->path().c_str());
    std::fflush(stdout);
    if (outputs && outputs->failed()) {
      return fail_run(outputs->error() + "; the run was stopped there (its metrics are above)");
    }
    if (out->stopped) {
      const int sig = g_stop_signal.load();
      std::fprintf(stderr,
                   "muflow run: stopped by %s: %lld of %lld requests had finished; those that "
                   "had arrived were cancelled (finish_reason \"cancelled\"%s), later ones "
                   "never made; metrics above are up to the stop%s\n",
                   sig == SIGTERM ? "SIGTERM" : "SIGINT", static_cast<long long>(*num_completed),
                   static_cast<long long>(num_offered), outputs ? " in --outputs" : "",
                   topo.trace_file.empty() ? "" : ", the trace holds what ran");
      return 128 + (sig != 0 ? sig : SIGINT);
    }
    if (o->quiet || topo.backend == "sim") return 0;  // sim token ids carry no text
    if (tok) {
      print_texts(out->outputs, *tok);
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
