// `muflow run --spawn-workers` end to end (#18): the command starts the topology's loopback
// workers, serves the workload across the processes and stops them; `--max-message-mib` is the
// driver's data-plane limit and is passed to the workers it starts, so a run whose batches are
// larger fails with the reason instead of waiting for them, and the same run passes under the
// default limit.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "scratch_path.hpp"

namespace {

namespace fs = std::filesystem;

struct Ran {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

Ran run_muflow(const std::string& args) {
  const std::string cmd = std::string(MUFLOW_BINARY) + " " + args + " 2>&1";
  Ran r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A synthetic model with 1,024-wide rows on 2 cpu devices, device 1 in a loopback worker; two
// 400-token prompts prefilled in one chunk each: a dispatch batch of ~800 rows is ~3 MB.
std::string wide_topology() {
  return "wiring = \"sync\"\nbackend = \"cpu\"\n[cluster]\nnum_devices = 2\n"
         "threads_per_device = 1\n[[cluster.workers]]\naddress = \"127.0.0.1:0\"\n"
         "devices = [1]\n[model]\ntype = \"mixtral\"\nvocab = 512\nhidden = 1024\nlayers = 1\n"
         "heads = 8\nkv_heads = 2\nhead_dim = 128\nexperts = 2\ntopk = 2\nffn = 256\nseed = 7\n"
         "dtype = \"f32\"\n[scheduler]\nmax_prefill_tokens = 512\nmax_batch_tokens = 1024\n"
         "[workload]\nkind = \"poisson\"\nnum_requests = 2\nrate = 1000.0\ninput = [400, 420]\n"
         "output = [2, 2]\nseed = 1\n[sampling]\nstop_at_eos = false\n";
}

TEST(CliSpawnWorkers, TheShippedTwoWorkerTopologyServesItsPrompts) {
  const Ran r = run_muflow(std::string("run ") + MUFLOW_SOURCE_DIR +
                           "/topologies/sync-kjv-2workers.toml --spawn-workers --quiet --no-trace");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("requests completed       8 / 8"), std::string::npos) << r.output;
}

TEST(CliSpawnWorkers, MaxMessageMibIsTheDriversAndTheWorkersLimit) {
  const fs::path dir = muflow::testing::scratch_path("cli_spawn_workers");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path topo = dir / "wide.toml";
  std::ofstream(topo) << wide_topology();
  const Ran small = run_muflow("run " + topo.string() +
                               " --spawn-workers --quiet --no-trace --max-message-mib 1");
  EXPECT_EQ(small.exit_code, 1) << small.output;
  EXPECT_NE(small.output.find("max_message_bytes"), std::string::npos) << small.output;
  // The worker got the same limit (either side may be the one whose refusal ends the run).
  EXPECT_NE(small.output.find("joined the data plane as process 1 (messages up to 1048576 bytes)"),
            std::string::npos)
      << small.output;
  const Ran fits = run_muflow("run " + topo.string() + " --spawn-workers --quiet --no-trace");
  ASSERT_EQ(fits.exit_code, 0) << fits.output;
  EXPECT_NE(fits.output.find("requests completed       2 / 2"), std::string::npos) << fits.output;
}

}  // namespace
