// The `muflow` command-line tool.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>

#include "tools/commands.hpp"

int muflow::tools::command_failed(const char* command, const std::string& what) {
  std::fprintf(stderr, "muflow %s: %s\n", command, what.c_str());
  return 1;
}

int main(int argc, char** argv) {
  CLI::App app{"muflow: actor-based dataflow engine for Mixture-of-Experts inference"};
  app.require_subcommand(1);
  std::map<CLI::App*, muflow::tools::Command> commands;
  auto add = [&](const char* name, const char* help, auto adder) {
    CLI::App* sub = app.add_subcommand(name, help);
    commands[sub] = adder(*sub);
  };
  add("run", "serve a topology's workload through its wiring (default: embedded demo)",
      muflow::tools::add_run_command);
  add("serve", "serve a model over an OpenAI-compatible HTTP API (default: embedded kjv model)",
      muflow::tools::add_serve_command);
  add("generate", "continue one prompt with a Hugging Face model folder",
      muflow::tools::add_generate_command);
  add("bench",
      "compare wirings and parameter sweeps on one workload (table, --csv), or load an "
      "OpenAI-compatible server with it (--url)",
      muflow::tools::add_bench_command);
  add("plan", "placement and all-to-all planners: Aurora order/colocation, ExFlow affinity",
      muflow::tools::add_plan_command);
  add("calibrate",
      "measure this machine's stage kernels (cpu or cuda backend) for the sim ([cost] kernels)",
      muflow::tools::add_calibrate_command);
  add("make-model", "write a synthetic MoE model folder (HF format, random weights)",
      muflow::tools::add_make_model_command);
  add("worker",
      "join a muflow cluster: serve the control plane on --listen, the data plane over UCX",
      muflow::tools::add_worker_command);
  CLI::App* trace = app.add_subcommand("trace", "inspect a Chrome trace written by `muflow run`");
  trace->require_subcommand(1);
  auto add_trace = [&](const char* name, const char* help, auto adder) {
    CLI::App* sub = trace->add_subcommand(name, help);
    commands[sub] = adder(*sub);
  };
  add_trace("summary", "busy/wait/idle per device, top waiting reasons, per-layer balance",
            muflow::tools::add_trace_summary_command);
  add_trace("view", "write a self-contained HTML report (timeline, queues, heatmap)",
            muflow::tools::add_trace_view_command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // usage errors exit 2 (documented in tools/README.md)
  }
  for (auto& [sub, run] : commands) {
    if (sub->parsed()) return run();
  }
  return 2;
}
