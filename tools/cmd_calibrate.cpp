// `muflow calibrate`: measure this machine's stage kernels for a topology's model on the cpu
// backend and write the CSV the sim reads with `[cost] kernels` (actors/calibration.hpp).

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "actors/calibration.hpp"
#include "tools/commands.hpp"
#include "tools/topology_arg.hpp"

namespace muflow::tools {

Command add_calibrate_command(CLI::App& app) {
  struct Options {
    std::string topology;
    std::string output;
    actors::CalibrationOptions calibration;
  };
  auto o = std::make_shared<Options>();
  app.add_option("TOPOLOGY", o->topology,
                 "topology whose model (and wiring, devices, threads_per_device) is measured; "
                 "default: the embedded kjv model");
  app.add_option("--backend", o->calibration.backend,
                 "backend to measure: cpu, or cuda (the first GPU; the rows then describe its "
                 "sim kind, e.g. H200)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("-o,--output", o->output, "CSV to write (kernels/sim/measured_kernels.hpp)")
      ->required();
  app.add_option("--max-tokens", o->calibration.max_tokens,
                 "largest batch measured (expert rows, prefill tokens, LM-head rows; default 512)")
      ->check(CLI::Range(8, 2048));
  app.add_option("--max-context", o->calibration.max_context,
                 "largest decode context measured (default 1024)")
      ->check(CLI::Range(1, 2048));
  app.add_option("--repeats", o->calibration.repeats, "timed calls per point (default 5)")
      ->check(CLI::Range(1, 100));
  app.add_option("--concurrent", o->calibration.concurrent,
                 "threads measuring at once, as the devices of one host run (default: the "
                 "topology's device count); with 2 or more, expert sizes are also timed alone "
                 "(expert_alone rows: the devices share the host's memory bandwidth)")
      ->check(CLI::Range(0, 64));
  return [o]() {
    absl::StatusOr<engine::topology::Topology> topology = load_topology_arg(o->topology);
    if (!topology.ok()) {
      std::fprintf(stderr, "muflow calibrate: %s\n",
                   std::string(topology.status().message()).c_str());
      return 1;
    }
    std::ofstream out(o->output);
    if (!out) {
      std::fprintf(stderr, "muflow calibrate: cannot write %s\n", o->output.c_str());
      return 1;
    }
    o->calibration.progress = [](const std::string& line) {
      std::fprintf(stderr, "muflow calibrate: %s\n", line.c_str());
    };
    if (absl::Status s = actors::calibrate(*topology, o->calibration, out); !s.ok()) {
      std::fprintf(stderr, "muflow calibrate: %s (rows measured so far are in %s)\n",
                   std::string(s.message()).c_str(), o->output.c_str());
      return 1;
    }
    std::fprintf(stderr, "muflow calibrate: wrote %s; use it with [cost] kernels = \"%s\"\n",
                 o->output.c_str(), o->output.c_str());
    return 0;
  };
}

}  // namespace muflow::tools
