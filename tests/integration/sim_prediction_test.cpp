// #19 item 3, CI-sized: `muflow calibrate`'s measurement (actors::calibrate) of a small
// synthetic Mixtral on this machine feeds the sim (`[cost] kernels`, the cpu run's recorded
// routing, in-process links), which must then predict the cpu backend's mean inter-token
// latency, mean time to first token and throughput on the same workload, measured warm (median
// of three runs after a warm-up run, as the calibration measures). The bounds are loose (a factor
// of 2, 3 for TTFT: CI machines are shared and the model is small); the full-size table with the
// measured ratios is in bench/README.md (bench/sim_prediction.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "actors/calibration.hpp"
#include "actors/server.hpp"
#include "calibration_topology.hpp"
#include "invariance_fixtures.hpp"
#include "kernels/sim/measured_kernels.hpp"
#include "scratch_path.hpp"

namespace muflow::testing_fixtures {
namespace {

TEST(SimPrediction, CalibratedSimPredictsTheCpuBackend) {
  const std::filesystem::path kernels = muflow::testing::scratch_path("cpu-kernels.csv");
  const std::filesystem::path routing = muflow::testing::scratch_path("routing.csv");
  // Hidden 256 and FFN 512, not 128 and 256: at that size a decode step (0.5–1.3 ms) was mostly
  // host time, calibrate's traced runs paid the trace's own cost in it while the measured runs
  // record none (the same measured runs with a trace: 0.97–1.63 ms), and the measured runs fell
  // into two modes from one process to the next (0.5–0.8 or 1.2–1.3 ms), so the ITL ratio ranged 0.82–2.63 over 35 runs on the
  // 2-core AVX2 VM and failed the bound in four; at this size 0.81–1.48 over 14 (3–5 ms steps).
  Topology cpu = calibration_topology("sync", 256, 512);
  const ModelConfig c = *cpu.model.synthetic;

  actors::CalibrationOptions options;
  options.max_tokens = 64;
  options.max_context = 128;
  options.repeats = 7;
  {
    std::ofstream out(kernels);
    ASSERT_TRUE(actors::calibrate(cpu, options, out).ok());
  }
  absl::StatusOr<kernels::sim::MeasuredKernels> table =
      kernels::sim::MeasuredKernels::read_csv(kernels.string());
  ASSERT_TRUE(table.ok()) << table.status();
  {
    // The in-run host time was measured on the real model: rows for attention runs at least
    // (experts and samplers may measure no excess, which is written as 0 or left out).
    std::ifstream in(kernels);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // The per-run overhead was measured (the tiny model's runs): its row is written, whatever
    // its value; what the tiny model's calls, barriers and grants do not explain of its
    // inter-token time can be nothing (0) on a loaded machine.
    EXPECT_NE(text.find("\nstage_overhead,"), std::string::npos);
    EXPECT_NE(text.find("\nhost_attention,"), std::string::npos);
    // And the barriers' (topology_for: the sync wiring, a dispatch and a combine per layer).
    EXPECT_NE(text.find("\nhost_dispatch,"), std::string::npos);
    EXPECT_NE(text.find("\nhost_combine,"), std::string::npos);
    // And the device actors' grants (a device hosts several experts of a block: hand-offs).
    EXPECT_NE(text.find("\nhost_grant,"), std::string::npos);
  }
  EXPECT_GT(table->expert_seconds(8, c.expert_ffn), 0.0);
  // Two devices measured at once, and each expert size again alone (shared memory bandwidth).
  EXPECT_EQ(table->concurrent(), 2);
  EXPECT_TRUE(table->has_expert_alone());
  EXPECT_GT(table->expert_seconds(8, c.expert_ffn, 0.0), 0.0);
  // The runs' spread around the sim's times for the same runs: real runs vary (on the 2-core VM
  // 0.04–0.20 by stage kind), so each stage kind's is above 0, and within the parser's bound.
  using Kind = kernels::sim::MeasuredKernels::RunKind;
  for (Kind k : {Kind::kAttention, Kind::kExpert, Kind::kSampler}) {
    EXPECT_GT(table->run_spread(k), 0.0) << kernels::sim::run_spread_key(k);
    EXPECT_LE(table->run_spread(k), kernels::sim::MeasuredKernels::kMaxRunSpread);
  }

  std::vector<Request> requests = make_requests(c.vocab_size, 1, 8, 11);
  for (Request& r : requests) {
    r.max_new_tokens = 24;
    r.return_prompt_logits = false;  // the sim has no math
  }
  // The sim predicts a warm engine: the measured side is the median of three runs on one
  // server after a run that warms it (oneDNN primitives, first touch of the weights and the
  // KV cache), as calibrate measures. One cold run on a shared CI machine once took 4x
  // the warm time in its prefill alone.
  Topology recorded = cpu;
  recorded.routing_record_file = routing.string();
  absl::StatusOr<std::unique_ptr<actors::Server>> server = actors::Server::create(recorded);
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<double> measured_itl_ms, measured_ttft_ms, measured_tokens_per_s;
  int64_t measured_tokens = 0;
  for (int round = 0; round < 4; ++round) {
    absl::StatusOr<actors::RunOutcome> out = (*server)->run(requests);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_TRUE(out->status.ok()) << out->status;
    if (round == 0) continue;  // the warm-up run
    measured_itl_ms.push_back(out->metrics.itl.mean_ms);
    measured_ttft_ms.push_back(out->metrics.ttft.mean_ms);
    measured_tokens_per_s.push_back(out->metrics.output_tokens_per_s);
    measured_tokens = out->metrics.num_output_tokens;
  }
  std::sort(measured_itl_ms.begin(), measured_itl_ms.end());
  std::sort(measured_ttft_ms.begin(), measured_ttft_ms.end());
  std::sort(measured_tokens_per_s.begin(), measured_tokens_per_s.end());
  const double measured_itl = measured_itl_ms[1];
  const double measured_ttft = measured_ttft_ms[1];
  const double measured_tput = measured_tokens_per_s[1];

  Topology sim = cpu;
  sim.backend = "sim";
  sim.router.kind = "recorded";
  sim.router.trace_file = routing.string();
  sim.network.intra_node = "in-process";
  sim.network.inter_node = "in-process";
  sim.network.activation_bytes = 4;
  sim.cost.kernels = kernels.string();
  sim.cost.kernels_where = "<test>";
  const actors::RunOutcome predicted = run_topology(sim, requests);
  ASSERT_TRUE(predicted.status.ok()) << predicted.status;
  ASSERT_EQ(predicted.metrics.num_output_tokens, measured_tokens);

  const double itl = predicted.metrics.itl.mean_ms / measured_itl;
  const double ttft = predicted.metrics.ttft.mean_ms / measured_ttft;
  const double tput = predicted.metrics.output_tokens_per_s / measured_tput;
  std::printf(
      "predicted / measured: ITL %.3f / %.3f ms = %.2f, TTFT %.3f / %.3f ms = %.2f, "
      "throughput %.1f / %.1f = %.2f\n",
      predicted.metrics.itl.mean_ms, measured_itl, itl, predicted.metrics.ttft.mean_ms,
      measured_ttft, ttft, predicted.metrics.output_tokens_per_s, measured_tput, tput);
  EXPECT_GT(itl, 0.5);
  EXPECT_LT(itl, 2.0);
  // TTFT of this closed batch is its one prefill iteration, a few ms, so the VM's drift between
  // calibrating and measuring shows most in it: 0.73-1.05 in 11 runs on the idle 2-core AVX2
  // VM, 0.55-0.77 in 4 beside two busy shells (where ITL gave 0.50-0.96), and once 0.45 (4.2 ms
  // predicted from a fast calibration, 9.3 ms measured) in a full ctest run: a factor of 3.
  EXPECT_GT(ttft, 1.0 / 3.0);
  EXPECT_LT(ttft, 3.0);
  EXPECT_GT(tput, 0.5);
  EXPECT_LT(tput, 2.0);
  std::filesystem::remove(kernels);
  std::filesystem::remove(routing);
}

}  // namespace
}  // namespace muflow::testing_fixtures
