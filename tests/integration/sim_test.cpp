// The sim backend: the same actors in virtual time with the cost model and the big-switch
// network. Determinism, scale, HarMoEny's §3 skew experiment and replay of a real routing
// trace.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "actors/server.hpp"
#include "engine/model/model_presets.hpp"
#include "engine/model/npy_reader.hpp"
#include "engine/routing/routing_record.hpp"
#include "engine/trace/trace_analysis.hpp"
#include "nlohmann/json.hpp"
#include "scratch_path.hpp"

namespace muflow {
namespace {

namespace fs = std::filesystem;
using engine::topology::Topology;

Topology sim_topology(int num_devices, const std::string& kind, const std::string& preset) {
  Topology t;
  t.source = "<sim test>";
  t.backend = "sim";
  for (int d = 0; d < num_devices; ++d) {
    t.devices.push_back({kind + std::to_string(d), kind, "node" + std::to_string(d / 8)});
  }
  absl::StatusOr<engine::model::ModelConfig> c = engine::model::model_preset(preset);
  EXPECT_TRUE(c.ok()) << c.status();
  t.model.synthetic = *c;
  t.model.preset = preset;
  t.model.dtype = "bf16";
  t.sampling.stop_at_eos = false;
  return t;
}

std::vector<engine::serving::Request> closed_batch(int num_requests, int prompt_len, int max_new) {
  std::vector<engine::serving::Request> out;
  for (int i = 0; i < num_requests; ++i) {
    engine::serving::Request r;
    r.id = i;
    r.max_new_tokens = max_new;
    for (int p = 0; p < prompt_len; ++p) r.prompt.push_back(3 + (i * 31 + p * 7) % 1000);
    out.push_back(std::move(r));
  }
  return out;
}

// A fresh folder per process and test (concurrent test runs never share files).
fs::path scratch_dir(const std::string& name) {
  fs::path p = muflow::testing::scratch_path("sim_" + name);
  fs::remove_all(p);
  return p;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Invariant 3: same topology and seed → byte-identical metrics and trace.
TEST(Sim, DeterministicMetricsAndTrace) {
  const fs::path dir = scratch_dir("det");
  fs::create_directories(dir);
  std::string metrics[2], trace[2];
  for (int run = 0; run < 2; ++run) {
    Topology t = sim_topology(16, "H100-SXM", "mixtral-8x7b");
    t.router.kind = "exponential";
    t.router.seed = 5;
    t.trace_file = (dir / ("run" + std::to_string(run) + ".json")).string();
    auto server = actors::Server::create(t);
    ASSERT_TRUE(server.ok()) << server.status();
    std::vector<engine::serving::Request> requests = closed_batch(24, 40, 12);
    for (size_t i = 0; i < requests.size(); ++i) requests[i].arrival_s = 0.003 * i;
    auto out = (*server)->run(requests);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->metrics.num_completed_requests, 24);
    EXPECT_EQ(out->metrics.num_output_tokens, 24 * 12);
    EXPECT_GT(out->metrics.all_to_all_s, 0.0);
    metrics[run] = engine::serving::to_json(out->metrics).dump();
    trace[run] = read_file(t.trace_file);
  }
  EXPECT_EQ(metrics[0], metrics[1]);
  EXPECT_TRUE(trace[0] == trace[1])
      << "the two traces differ (" << trace[0].size() << " vs " << trace[1].size() << " bytes)";
  EXPECT_GT(trace[0].size(), 1000u);
}

// Every request gets its output length in virtual time, on 256 simulated devices.
TEST(Sim, RunsOn256Devices) {
  Topology t = sim_topology(256, "H100-SXM", "synthetic-E256-k8");
  t.router.kind = "uniform";
  auto server = actors::Server::create(t);
  ASSERT_TRUE(server.ok()) << server.status();
  auto out = (*server)->run(closed_batch(64, 16, 4));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->metrics.num_output_tokens, 64 * 4);
  EXPECT_EQ(out->metrics.device_busy_pct.size(), 256u);
}

// Sparse iterations (#19 item 6): on a barrier wiring whose tokens stay on their rank, an
// iteration runs on the DP ranks with tokens only. Three requests on 16 devices, arriving
// apart: every request gets its tokens, and only the ranks that were given a request ever
// wait in a dispatch barrier (before, all 16 ranks passed an empty contribution to every
// barrier of every iteration and waited there).
TEST(Sim, RanksWithoutTokensTakeNoPartInAnIteration) {
  for (const std::string wiring : {"sync", "harmoeny", "moeshard"}) {
    const fs::path dir = scratch_dir("sparse_" + wiring);
    fs::create_directories(dir);
    Topology t = sim_topology(16, "H100-SXM", "mixtral-8x7b");
    t.wiring = wiring;
    t.router.kind = "uniform";
    t.trace_file = (dir / "trace.json").string();
    auto server = actors::Server::create(t);
    ASSERT_TRUE(server.ok()) << server.status();
    std::vector<engine::serving::Request> requests = closed_batch(3, 24, 6);
    for (size_t i = 0; i < requests.size(); ++i) requests[i].arrival_s = 0.004 * i;
    auto out = (*server)->run(requests);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->metrics.num_output_tokens, 3 * 6) << wiring;
    const nlohmann::json trace = nlohmann::json::parse(read_file(t.trace_file));
    std::set<int64_t> admitted, waited;
    int64_t waits = 0;
    for (const nlohmann::json& e : trace.at("traceEvents")) {
      const std::string name = e.value("name", "");
      if (name == "admit") admitted.insert(e.at("pid").get<int64_t>());
      if (name.rfind("wait dispatch b", 0) == 0 && e.value("ph", "") == "X") {
        waited.insert(e.at("pid").get<int64_t>());
        ++waits;
      }
    }
    EXPECT_FALSE(admitted.empty()) << wiring;
    EXPECT_EQ(admitted.size(), 3u) << wiring << ": the requests overlap, one per rank";
    EXPECT_GT(waits, 0) << wiring;
    EXPECT_EQ(waited, admitted) << wiring;
  }
}

// Expert compute per device from the run's trace (sum of expert stage slices, µs).
std::vector<double> expert_busy_per_device(const std::string& trace_path, int num_devices) {
  absl::StatusOr<engine::trace::TraceReport> report =
      engine::trace::analyze_trace_file(trace_path, engine::trace::AnalysisOptions{});
  EXPECT_TRUE(report.ok()) << report.status();
  std::vector<double> busy(num_devices, 0.0);
  for (const auto& s : report->stages) {
    if (s.kind == engine::trace::TraceStageKind::kExpert) busy.at(s.pid) += s.busy_us;
  }
  return busy;
}

// HarMoEny §3: Switch-base-128 on 8 × V100 (NVLink), sync EP, 90% of tokens to 10 experts
// that all live on GPU 0 (experts placed in contiguous blocks of 16): the other GPUs idle for
// most of each MoE layer (the paper measured > 82%); with uniform routing they do not.
TEST(Sim, HarmoenySkewLeavesColdDevicesIdle) {
  const fs::path dir = scratch_dir("harmoeny");
  fs::create_directories(dir);
  double idle_skewed = 0, idle_uniform = 0;
  for (const bool skewed : {true, false}) {
    Topology t = sim_topology(8, "V100-32GB", "switch-base-128");
    t.model.dtype = "f32";  // HarMoEny runs fp32 on V100
    t.network.activation_bytes = 4;
    t.placement = "explicit";
    for (int e = 0; e < 128; ++e) t.expert_device.push_back(e / 16);
    t.router.kind = skewed ? "harmoeny-skew" : "uniform";
    t.router.skew = 0.9;
    t.router.hot_experts = 10;
    t.router.skew_mode = "share";
    t.scheduler.max_prefill_tokens = 4096;
    t.trace_file = (dir / (skewed ? "skewed.json" : "uniform.json")).string();
    auto server = actors::Server::create(t);
    ASSERT_TRUE(server.ok()) << server.status();
    // A constant batch of 1024-token prefills (HarMoEny's "constant" dataset), 4 per GPU.
    auto out = (*server)->run(closed_batch(32, 1024, 1));
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<double> busy = expert_busy_per_device(t.trace_file, 8);
    const double max_busy = *std::max_element(busy.begin(), busy.end());
    double idle = 0;  // HarMoEny's per-layer idle: (max rank compute − own) / max, cold GPUs
    for (int d = 1; d < 8; ++d) idle += (max_busy - busy[d]) / max_busy / 7.0;
    (skewed ? idle_skewed : idle_uniform) = idle;
    if (skewed) {
      EXPECT_EQ(busy[0], max_busy) << "GPU 0 hosts the hot experts";
    }
  }
  std::printf("idle fraction of GPUs 1-7 in MoE layers: skewed %.3f, uniform %.3f\n", idle_skewed,
              idle_uniform);
  EXPECT_GT(idle_skewed, 0.82);
  EXPECT_LT(idle_uniform, 0.2);
}

// Replaying the real Switch-128 BookCorpus routing trace: the expert load per block the sim
// reports equals the trace's per-layer counts (every trace row visited exactly once), and so
// does the per-device balance derived from it.
TEST(Sim, ReplayedTraceLoadMatchesTheFile) {
  const std::string npy = std::string(MUFLOW_DATA_DIR) + "/routing/switch-base-128-bookcorpus.npy";
  if (!fs::exists(npy)) GTEST_SKIP() << "routing trace not found at " << npy;
  absl::StatusOr<engine::model::NpyInt64Array> file = engine::model::read_npy_i64(npy);
  ASSERT_TRUE(file.ok()) << file.status();
  const int64_t rows = file->shape[0], cols = file->shape[1];
  ASSERT_EQ(rows, 680 * 60);

  const fs::path dir = scratch_dir("replay");
  fs::create_directories(dir);
  Topology t = sim_topology(8, "V100-32GB", "switch-base-128");
  t.router.kind = "replay-npy";
  t.router.trace_file = npy;
  t.router.replay_tokens_per_request = 60;
  t.scheduler.max_prefill_tokens = 8192;
  t.scheduler.max_batch_requests = 128;
  t.trace_file = (dir / "replay.json").string();
  auto server = actors::Server::create(t);
  ASSERT_TRUE(server.ok()) << server.status();
  auto out = (*server)->run(closed_batch(680, 60, 1));  // prefill only: 40,800 tokens
  ASSERT_TRUE(out.ok()) << out.status();

  absl::StatusOr<engine::trace::TraceReport> report =
      engine::trace::analyze_trace_file(t.trace_file, engine::trace::AnalysisOptions{});
  ASSERT_TRUE(report.ok()) << report.status();
  const auto& heat = report->heatmap;
  ASSERT_EQ(heat.num_blocks, cols);
  for (int64_t b = 0; b < cols; ++b) {
    std::vector<int64_t> expected(128, 0);
    for (int64_t r = 0; r < rows; ++r) ++expected[file->data[r * cols + b]];
    std::vector<int64_t> got(heat.expert_tokens[b].begin(), heat.expert_tokens[b].end());
    got.resize(128, 0);
    EXPECT_EQ(got, expected) << "block " << b;
    // Per-device load under round-robin placement, and its balance (mean / max).
    std::vector<int64_t> per_device(8, 0);
    for (int e = 0; e < 128; ++e) per_device[e % 8] += expected[e];
    const double max_load = *std::max_element(per_device.begin(), per_device.end());
    const double mean_load = static_cast<double>(rows) / 8.0;
    EXPECT_NEAR(report->balance[b].mean_over_max, mean_load / max_load, 1e-9) << "block " << b;
  }
}

// Invariant 1 across backends: a cpu run records every token's expert choices per block (from
// the model's real gate); the sim backend replays that record with the same sync wiring and
// must route every (request, position, block) exactly as the cpu did — the same tokens pass the
// same blocks in both, none dropped or duplicated.
TEST(Sim, SameExpertChoicesAsTheCpuBackend) {
  const fs::path dir = scratch_dir("vs_cpu");
  fs::create_directories(dir);
  engine::model::ModelConfig c;
  c.vocab_size = 211;
  c.hidden_size = 64;
  c.num_layers = 3;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.num_experts = 8;
  c.num_topk = 2;
  c.expert_ffn = 96;
  std::vector<engine::serving::Request> requests = closed_batch(6, 9, 7);
  for (auto& r : requests) {
    for (auto& id : r.prompt) id %= 211;
  }

  Topology cpu;
  cpu.source = "<cpu>";
  for (int d = 0; d < 4; ++d) cpu.devices.push_back({"cpu" + std::to_string(d)});
  cpu.model.synthetic = c;
  cpu.model.seed = 9;
  cpu.sampling.stop_at_eos = false;
  cpu.scheduler.max_prefill_tokens = 5;
  cpu.routing_record_file = (dir / "cpu.csv").string();
  auto cpu_server = actors::Server::create(cpu);
  ASSERT_TRUE(cpu_server.ok()) << cpu_server.status();
  ASSERT_TRUE((*cpu_server)->run(requests).ok());

  Topology sim = cpu;
  sim.source = "<sim>";
  sim.backend = "sim";
  for (auto& d : sim.devices) d.kind = "A100-80GB";
  sim.router.kind = "recorded";
  sim.router.trace_file = cpu.routing_record_file;
  sim.routing_record_file = (dir / "sim.csv").string();
  auto sim_server = actors::Server::create(sim);
  ASSERT_TRUE(sim_server.ok()) << sim_server.status();
  auto out = (*sim_server)->run(requests);
  ASSERT_TRUE(out.ok()) << out.status();

  absl::StatusOr<engine::routing::RoutingTable> a =
      engine::routing::read_routing_csv(cpu.routing_record_file);
  absl::StatusOr<engine::routing::RoutingTable> b =
      engine::routing::read_routing_csv(sim.routing_record_file);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  // 6 requests x (9 prompt + 6 fed-back generated positions) x 3 blocks.
  EXPECT_EQ(a->size(), 6u * 15u * 3u);
  ASSERT_EQ(a->size(), b->size());
  for (const auto& [key, choice] : *a) {
    auto it = b->find(key);
    ASSERT_NE(it, b->end());
    EXPECT_EQ(it->second.experts, choice.experts);
    EXPECT_EQ(it->second.weights, choice.weights);
  }
}

// A model given by an HF folder runs on the sim backend from its config.json alone.
TEST(Sim, ModelFromHfConfigWithoutWeights) {
  const std::string dir = std::string(MUFLOW_DATA_DIR) + "/models/kjv-mixtral-tiny";
  if (!fs::exists(dir + "/config.json")) GTEST_SKIP() << "no model at " << dir;
  Topology t;
  t.source = "<sim kjv>";
  t.backend = "sim";
  for (int d = 0; d < 4; ++d) t.devices.push_back({"h" + std::to_string(d), "H100-SXM"});
  t.model.path = dir;
  t.sampling.stop_at_eos = false;
  auto server = actors::Server::create(t);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->config().num_experts, 8);
  EXPECT_EQ((*server)->model(), nullptr);  // no weights loaded
  auto out = (*server)->run(closed_batch(4, 12, 5));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->metrics.num_output_tokens, 20);
}

// `[network] a2a_order` changes when all-to-alls finish, never the answer: the same tokens and
// the same traffic (hence the same sum of lower bounds b_max) under every order; no order
// beats b_max, and Aurora's is at least as fast as row-major and SJF on skewed traffic.
TEST(Sim, AllToAllOrderChangesTimeNotTokens) {
  std::map<std::string, actors::RunOutcome> runs;
  for (const std::string order : {"row_major", "sjf", "random", "aurora"}) {
    Topology t = sim_topology(8, "A100-80GB", "switch-base-8");
    t.network.intra_node = "eth-100g";
    t.network.a2a_order = order;
    t.router.kind = "exponential";
    t.router.exp_rate = 0.6;  // hot expert ≈ 3× the mean load
    t.router.seed = 3;
    auto server = actors::Server::create(t);
    ASSERT_TRUE(server.ok()) << server.status();
    auto out = (*server)->run(closed_batch(32, 96, 3));
    ASSERT_TRUE(out.ok()) << out.status();
    runs[order] = std::move(*out);
  }
  const actors::RunOutcome& base = runs.at("row_major");
  ASSERT_GT(base.metrics.all_to_all_bound_s, 0.0);
  for (const auto& [order, out] : runs) {
    SCOPED_TRACE(order);
    ASSERT_EQ(out.outputs.size(), base.outputs.size());
    for (size_t i = 0; i < out.outputs.size(); ++i) {
      EXPECT_EQ(out.outputs[i].output, base.outputs[i].output);
    }
    EXPECT_DOUBLE_EQ(out.metrics.all_to_all_bound_s, base.metrics.all_to_all_bound_s);
    EXPECT_GE(out.metrics.all_to_all_s, out.metrics.all_to_all_bound_s * (1 - 1e-9));
  }
  const double aurora = runs.at("aurora").metrics.all_to_all_s;
  EXPECT_LE(aurora, runs.at("row_major").metrics.all_to_all_s);
  EXPECT_LE(aurora, runs.at("sjf").metrics.all_to_all_s);
  std::printf("a2a seconds: bound %.6f row_major %.6f sjf %.6f random %.6f aurora %.6f\n",
              base.metrics.all_to_all_bound_s, base.metrics.all_to_all_s,
              runs.at("sjf").metrics.all_to_all_s, runs.at("random").metrics.all_to_all_s, aurora);
}

// `[network] model = "fair-share"` changes when transfers finish, never the answer: the same
// tokens as the serial ports on a barrier wiring (all-to-alls) and on async (point-to-point
// sends); no all-to-all beats the model's own bound; and the simulation stays deterministic
// (two runs give bit-identical times).
TEST(Sim, FairShareNetworkChangesTimeNotTokens) {
  for (const std::string wiring : {"sync", "async"}) {
    SCOPED_TRACE(wiring);
    std::map<std::string, actors::RunOutcome> runs;
    for (const std::string model : {"serial", "fair-share", "fair-share-again"}) {
      Topology t = sim_topology(8, "A100-80GB", "switch-base-8");
      t.wiring = wiring;
      t.network.intra_node = "eth-100g";
      t.network.model = model == "serial" ? "serial" : "fair-share";
      t.router.kind = "exponential";
      t.router.exp_rate = 0.6;
      t.router.seed = 3;
      auto server = actors::Server::create(t);
      ASSERT_TRUE(server.ok()) << server.status();
      auto out = (*server)->run(closed_batch(32, 96, 3));
      ASSERT_TRUE(out.ok()) << out.status();
      runs[model] = std::move(*out);
    }
    const actors::RunOutcome& serial = runs.at("serial");
    const actors::RunOutcome& fair = runs.at("fair-share");
    ASSERT_EQ(fair.outputs.size(), serial.outputs.size());
    for (size_t i = 0; i < fair.outputs.size(); ++i) {
      EXPECT_EQ(fair.outputs[i].output, serial.outputs[i].output);
    }
    EXPECT_GE(fair.metrics.all_to_all_s, fair.metrics.all_to_all_bound_s * (1 - 1e-9));
    EXPECT_EQ(runs.at("fair-share-again").metrics.duration_s, fair.metrics.duration_s);
    EXPECT_EQ(runs.at("fair-share-again").metrics.all_to_all_s, fair.metrics.all_to_all_s);
    EXPECT_NE(fair.metrics.duration_s, serial.metrics.duration_s);
    std::printf(
        "%s: duration serial %.6f fair-share %.6f; a2a serial %.6f (bound %.6f) "
        "fair-share %.6f (bound %.6f)\n",
        wiring.c_str(), serial.metrics.duration_s, fair.metrics.duration_s,
        serial.metrics.all_to_all_s, serial.metrics.all_to_all_bound_s, fair.metrics.all_to_all_s,
        fair.metrics.all_to_all_bound_s);
  }
}

// `[cost]` step overheads: a stage run costs its kernels plus the host overheads of its
// device kind. One request of a top-1 model on sync: each decode step runs, one after the
// other, an attention and an expert stage per block and the sampler, so the inter-token
// latency grows by exactly (2 · blocks + 1) · (stage + scheduler overhead). Overheads of a
// kind no device has change nothing; the tokens never change.
TEST(Sim, StepOverheadsAddToEveryStageRun) {
  auto run = [](double stage_us, double scheduler_us, const std::string& other_kind_us) {
    Topology t = sim_topology(2, "A100-80GB", "switch-base-8");
    t.cost.overheads = {stage_us, scheduler_us};
    if (!other_kind_us.empty()) t.cost.kinds["H100-SXM"] = {std::stod(other_kind_us), 0.0};
    auto server = actors::Server::create(t);
    EXPECT_TRUE(server.ok()) << server.status();
    auto out = (*server)->run(closed_batch(1, 16, 9));
    EXPECT_TRUE(out.ok()) << out.status();
    return std::move(*out);
  };
  const actors::RunOutcome base = run(0, 0, "");
  const actors::RunOutcome slow = run(30, 10, "");
  const actors::RunOutcome other = run(0, 0, "500");
  const int64_t blocks = engine::model::model_preset("switch-base-8")->num_layers;
  EXPECT_NEAR(slow.metrics.itl.mean_ms - base.metrics.itl.mean_ms,
              static_cast<double>(2 * blocks + 1) * 40e-3, 1e-6);
  EXPECT_GT(slow.metrics.ttft.mean_ms, base.metrics.ttft.mean_ms);
  EXPECT_EQ(other.metrics.duration_s, base.metrics.duration_s);
  ASSERT_EQ(slow.outputs.size(), base.outputs.size());
  EXPECT_EQ(slow.outputs[0].output, base.outputs[0].output);
}

// `[cost.expert_ffn]`: the V100 Switch-expert CSV calibrates the V100 kind's expert kernel
// times (kernels::sim::CostModel::calibrate_expert_ffn): the fit is kept and reported, runs
// on V100s change their time and keep their tokens, and a CSV that does not fit is an error
// naming the key.
TEST(Sim, ExpertFfnCalibrationKeyCalibratesTheKind) {
  const std::string csv =
      std::string(MUFLOW_DATA_DIR) + "/kernels/v100-switch-expert-time-vs-tokens.csv";
  if (!fs::exists(csv)) GTEST_SKIP() << "kernel-times CSV not found at " << csv;
  std::map<bool, actors::RunOutcome> runs;
  for (bool calibrated : {false, true}) {
    Topology t = sim_topology(2, "V100-32GB", "switch-base-8");
    t.model.dtype = "f32";
    if (calibrated) {
      engine::topology::ExpertFfnCalibration cal;
      cal.file = csv;
      t.cost.expert_ffn = cal;
    }
    auto server = actors::Server::create(t);
    ASSERT_TRUE(server.ok()) << server.status();
    ASSERT_NE((*server)->sim_setup(), nullptr);
    EXPECT_EQ((*server)->sim_setup()->calibration.has_value(), calibrated);
    if (calibrated) {
      const kernels::sim::CalibrationFit& fit = *(*server)->sim_setup()->calibration;
      EXPECT_GT(fit.num_samples, 100);
      EXPECT_LT(fit.mean_rel_error, 0.2);
    }
    auto out = (*server)->run(closed_batch(8, 64, 4));
    ASSERT_TRUE(out.ok()) << out.status();
    runs[calibrated] = std::move(*out);
  }
  EXPECT_NE(runs[true].metrics.duration_s, runs[false].metrics.duration_s);
  for (size_t i = 0; i < runs[true].outputs.size(); ++i) {
    EXPECT_EQ(runs[true].outputs[i].output, runs[false].outputs[i].output);
  }
  // Wrong dims for this file: the fit would beat the V100's peak.
  Topology bad = sim_topology(2, "V100-32GB", "switch-base-8");
  engine::topology::ExpertFfnCalibration cal;
  cal.file = csv;
  cal.hidden = 8192;
  cal.ffn = 32768;
  cal.where = "topo.toml:12";
  bad.cost.expert_ffn = cal;
  auto server = actors::Server::create(bad);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("topo.toml:12: key 'cost.expert_ffn.file'"),
            std::string::npos)
      << server.status();
}

// Aurora Theorem 5.1 on mixed GPU kinds: `experts = "capability"` puts the most loaded experts
// on the fastest devices, which shortens the MoE layers under a skewed router; the tokens stay
// the same.
TEST(Sim, CapabilityPlacementOnMixedGpuKinds) {
  std::map<std::string, actors::RunOutcome> runs;
  for (const std::string placement : {"round-robin", "capability"}) {
    Topology t = sim_topology(4, "A100-80GB", "synthetic-E4-k1");
    t.devices[0].kind = "V100-32GB";
    t.devices[3].kind = "H100-SXM";
    t.placement = placement;
    t.router.kind = "exponential";
    t.router.exp_rate = 0.5;
    t.router.seed = 2;
    t.scheduler.max_prefill_tokens = 8192;
    auto server = actors::Server::create(t);
    ASSERT_TRUE(server.ok()) << server.status();
    auto out = (*server)->run(closed_batch(32, 256, 3));
    ASSERT_TRUE(out.ok()) << out.status();
    runs[placement] = std::move(*out);
  }
  const engine::serving::RunMetrics& rr = runs.at("round-robin").metrics;
  const engine::serving::RunMetrics& cap = runs.at("capability").metrics;
  EXPECT_LT(cap.moe_layer.mean_ms, rr.moe_layer.mean_ms);
  EXPECT_GT(cap.output_tokens_per_s, rr.output_tokens_per_s);
  for (size_t i = 0; i < runs.at("round-robin").outputs.size(); ++i) {
    EXPECT_EQ(runs.at("capability").outputs[i].output, runs.at("round-robin").outputs[i].output);
  }
  Topology cpu = sim_topology(4, "A100-80GB", "synthetic-E4-k1");
  cpu.backend = "cpu";
  cpu.placement = "capability";
  cpu.model.preset.clear();
  engine::model::ModelConfig& small = *cpu.model.synthetic;  // cpu builds weights: keep them tiny
  small.hidden_size = 64;
  small.num_heads = 4;
  small.num_kv_heads = 2;
  small.head_dim = 16;
  small.expert_ffn = 64;
  small.vocab_size = 256;
  small.num_layers = 2;
  for (auto& d : cpu.devices) d.kind = "cpu";
  auto server = actors::Server::create(cpu);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("needs backend = \"sim\""), std::string::npos)
      << server.status();
}

// exflow in virtual time: the same tokens as sync; decode tokens continue where their top-1
// expert ran (fewer combine rows off-device under top-1); the K/V rows it replicates are part
// of every dispatch, and no all-to-all finishes before its bound.
TEST(Sim, ExflowMovesFewerCombineRowsAndNeverBeatsTheBound) {
  std::map<std::string, actors::RunOutcome> runs;
  for (const std::string wiring : {"sync", "exflow"}) {
    Topology t = sim_topology(8, "A100-80GB", "switch-base-8");
    t.wiring = wiring;
    t.network.a2a_order = "aurora";
    t.router.kind = "exponential";
    t.router.seed = 4;
    auto server = actors::Server::create(t);
    ASSERT_TRUE(server.ok()) << server.status();
    auto out = (*server)->run(closed_batch(16, 24, 12));
    ASSERT_TRUE(out.ok()) << out.status();
    runs[wiring] = std::move(*out);
  }
  const engine::serving::RunMetrics& sync = runs.at("sync").metrics;
  const engine::serving::RunMetrics& exflow = runs.at("exflow").metrics;
  for (size_t i = 0; i < runs.at("sync").outputs.size(); ++i) {
    EXPECT_EQ(runs.at("exflow").outputs[i].output, runs.at("sync").outputs[i].output);
  }
  EXPECT_EQ(exflow.combine_rows, sync.combine_rows);
  EXPECT_LT(exflow.combine_remote_rows, sync.combine_remote_rows);
  EXPECT_GE(exflow.all_to_all_s, exflow.all_to_all_bound_s * (1 - 1e-9));
  EXPECT_GE(sync.all_to_all_s, sync.all_to_all_bound_s * (1 - 1e-9));
}

// [cost] attention_overhead_us / expert_overhead_us land on their stage type only. One
// request, one output token, sync EP, one expert per device: the first token waits for every
// block's attention (barriers take the slowest rank, and every rank runs each block) and the
// sampler, and for every block's expert stages (in parallel on their devices), so X µs more
// per attention run add (layers + 1)·X to the TTFT and per expert run layers·X, exactly.
TEST(Sim, AttentionAndExpertOverheadsChargeTheirStageTypeOnly) {
  auto ttft_s = [](double attention_us, double expert_us) {
    Topology t = sim_topology(8, "H100-SXM", "mixtral-8x7b");  // one expert per device
    t.cost.overheads.attention_us = attention_us;
    t.cost.overheads.expert_us = expert_us;
    auto server = actors::Server::create(t);
    EXPECT_TRUE(server.ok()) << server.status();
    auto out = (*server)->run(closed_batch(1, 16, 1));
    EXPECT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->metrics.ttft.num_samples, 1);
    return out->metrics.ttft.mean_ms * 1e-3;
  };
  const double layers = 32;  // mixtral-8x7b
  const double base = ttft_s(0, 0);
  EXPECT_NEAR(ttft_s(1000, 0) - base, (layers + 1) * 1e-3, 1e-9);
  EXPECT_NEAR(ttft_s(0, 1000) - base, layers * 1e-3, 1e-9);
}

}  // namespace
}  // namespace muflow

namespace muflow {
namespace {

// A `[cost] kernels` file for switch-base-8 (`c`) measured by 2 threads: attention, expert
// and LM-head rows at 1 and 64 tokens (one expert row per width `c.expert_ffn`), then
// `extra_rows` (CSV lines); written to `path`.
std::string write_switch_kernels(const fs::path& path, const engine::model::ModelConfig& c,
                                 const std::string& extra_rows) {
  std::string text = absl::StrFormat(
      "# kind=cpu hidden=%d ffn=%d heads=%d kv_heads=%d head_dim=%d experts=%d topk=%d "
      "vocab=%d gated=0 dtype=bf16 threads=1 concurrent=2\nop,tokens,context,width,seconds\n",
      c.hidden_size, c.expert_ffn, c.num_heads, c.num_kv_heads, c.head_dim, c.num_experts,
      c.num_topk, c.vocab_size);
  for (int n : {1, 64}) {
    text += absl::StrFormat("attention,%d,1,0,%.9g\n", n, (300 + n) * 1e-6);
    text += absl::StrFormat("attention,%d,64,0,%.9g\n", n, (300 + 2 * n) * 1e-6);
    text += absl::StrFormat("expert,%d,0,%d,%.9g\n", n, c.expert_ffn, (200 + 2 * n) * 1e-6);
    text += absl::StrFormat("lm_head,%d,0,0,%.9g\n", n, (30 + n) * 1e-6);
  }
  std::ofstream(path) << text << extra_rows;
  return path.string();
}

// `expert_alone` rows for write_switch_kernels' expert rows: `factor` times their times (the
// expert run alone on its node), at 1 and 64 tokens.
std::string expert_alone_rows(const engine::model::ModelConfig& c, double factor) {
  std::string rows;
  for (int n : {1, 64}) {
    rows += absl::StrFormat("expert_alone,%d,0,%d,%.9g\n", n, c.expert_ffn,
                            factor * (200 + 2 * n) * 1e-6);
  }
  return rows;
}

// switch-base-8 wired `wiring` on 2 cpu-kind sim devices with the measured `kernels` (on two
// nodes with `two_nodes`: no neighbour shares the expert device's memory), a closed batch of 8
// requests (24 prompt, 6 new tokens).
actors::RunOutcome switch_run(const std::string& wiring, const std::string& kernels,
                              bool two_nodes = false, uint64_t spread_seed = 1) {
  Topology t = sim_topology(2, "cpu", "switch-base-8");
  t.wiring = wiring;
  t.cost.kernels = kernels;
  t.cost.spread_seed = spread_seed;
  if (two_nodes) t.devices[0].node = "node1";
  auto server = actors::Server::create(t);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return {};
  auto out = (*server)->run(closed_batch(8, 24, 6));
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  return std::move(*out);
}

// Measured kernels (`[cost] kernels`) with `expert_alone` rows: devices of one node share its
// memory, so an expert run progresses at its alone rate while no other device of the node is
// busy and at its concurrent rate while the other measured device is. On async
// (attention and experts on different devices) the expert device often runs while the
// attention device waits (attention runs here take about as long as expert runs, so both
// cases occur): with alone rows half the concurrent time, its busy time and the run's
// duration fall, by less than half and by less than with the attention device on another
// node (where no expert run has a busy neighbour); alone rows equal to the concurrent ones
// change no time at all; the tokens never change.
TEST(Sim, ExpertRunsAloneOnANodeAreChargedTheirAloneTime) {
  const engine::model::ModelConfig c = *engine::model::model_preset("switch-base-8");
  const fs::path dir = scratch_dir("expert_alone");
  fs::create_directories(dir);
  auto write_kernels = [&](const std::string& name, double alone_factor) {
    return write_switch_kernels(dir / name, c,
                                alone_factor > 0 ? expert_alone_rows(c, alone_factor) : "");
  };
  const actors::RunOutcome beside = switch_run("async", write_kernels("beside.csv", 0));
  const actors::RunOutcome same = switch_run("async", write_kernels("same.csv", 1.0));
  const actors::RunOutcome alone = switch_run("async", write_kernels("alone.csv", 0.5));
  const actors::RunOutcome apart =
      switch_run("async", write_kernels("alone.csv", 0.5), /*two_nodes=*/true);
  // Shared runs move their ends through messages of the deterministic scheduler: a second run
  // gives the same times.
  const actors::RunOutcome again = switch_run("async", write_kernels("alone.csv", 0.5));
  EXPECT_EQ(again.metrics.duration_s, alone.metrics.duration_s);
  EXPECT_EQ(again.metrics.device_busy_pct, alone.metrics.device_busy_pct);
  EXPECT_EQ(same.metrics.duration_s, beside.metrics.duration_s);
  EXPECT_EQ(same.metrics.device_busy_pct, beside.metrics.device_busy_pct);
  EXPECT_LT(alone.metrics.duration_s, beside.metrics.duration_s);
  // Busy seconds of the expert device (async: device 1); every expert run alone would halve
  // them, none alone would leave them.
  const double busy_beside = beside.metrics.device_busy_pct[1] * beside.metrics.duration_s;
  const double busy_alone = alone.metrics.device_busy_pct[1] * alone.metrics.duration_s;
  EXPECT_LT(busy_alone, busy_beside * 0.99);
  EXPECT_GT(busy_alone, busy_beside * 0.52);
  // With the attention device on another node every expert run is alone: the one-node run
  // must cost more than that (its busy neighbour counted), or the activity is not tracked.
  const double busy_apart = apart.metrics.device_busy_pct[1] * apart.metrics.duration_s;
  EXPECT_GT(busy_alone, busy_apart * 1.05);
  std::printf("expert device busy: %.6f s beside, %.6f s with alone rows, %.6f s on 2 nodes\n",
              busy_beside, busy_alone, busy_apart);
  ASSERT_EQ(alone.outputs.size(), beside.outputs.size());
  for (size_t i = 0; i < alone.outputs.size(); ++i) {
    EXPECT_EQ(alone.outputs[i].output, beside.outputs[i].output);
  }
}

// A negative in-run expert correction (`host_expert` below 0: the kernel rows over-estimate runs
// of that size) shortens expert runs even where all of a run is contended work (expert_alone
// rows, async on one node): the contended work shrinks in proportion instead of the correction
// being lost at the uncontended rest's floor of 0. The tokens never change.
TEST(Sim, ANegativeExpertCorrectionShortensSharedExpertRuns) {
  const engine::model::ModelConfig c = *engine::model::model_preset("switch-base-8");
  const fs::path dir = scratch_dir("negative_host_expert");
  fs::create_directories(dir);
  auto write_kernels = [&](const std::string& name, double host_expert_s) {
    std::string rows = expert_alone_rows(c, 0.5);
    for (int n : {1, 64}) {
      if (host_expert_s != 0)
        rows += absl::StrFormat("host_expert,%d,0,0,%.9g\n", n, host_expert_s);
    }
    return write_switch_kernels(dir / name, c, rows);
  };
  const actors::RunOutcome plain = switch_run("async", write_kernels("plain.csv", 0));
  const actors::RunOutcome faster = switch_run("async", write_kernels("faster.csv", -80e-6));
  // Far more than any run: every run ends at once, none before it starts.
  const actors::RunOutcome none = switch_run("async", write_kernels("none.csv", -1.0));
  const double busy_plain = plain.metrics.device_busy_pct[1] * plain.metrics.duration_s;
  const double busy_faster = faster.metrics.device_busy_pct[1] * faster.metrics.duration_s;
  const double busy_none = none.metrics.device_busy_pct[1] * none.metrics.duration_s;
  // Expert runs take 100–330 µs here (half alone): 80 µs less is at least a quarter.
  EXPECT_LT(busy_faster, busy_plain * 0.8);
  EXPECT_GT(busy_faster, 0.0);
  EXPECT_LT(busy_none, busy_faster);
  EXPECT_EQ(busy_none, 0.0);  // every run takes 0, none less
  std::printf("expert device busy: %.6f s, %.6f s with -80 us per run, %.6f s with -1 s\n",
              busy_plain, busy_faster, busy_none);
  for (const actors::RunOutcome* o : {&faster, &none}) {
    ASSERT_EQ(o->outputs.size(), plain.outputs.size());
    for (size_t i = 0; i < plain.outputs.size(); ++i) {
      EXPECT_EQ(o->outputs[i].output, plain.outputs[i].output);
    }
  }
}

// Measured barrier host times (`host_dispatch` / `host_combine` rows of `[cost] kernels`): a
// barrier's destinations get their batches that much later. In the sync wiring every layer's
// dispatch and combine stand between its attention and the next, so with flat rows each decode
// iteration takes layers · (dispatch + combine) longer, and so does the inter-token latency;
// the tokens never change.
TEST(Sim, BarrierHostTimesDelayEachBarriersDestinations) {
  const engine::model::ModelConfig c = *engine::model::model_preset("switch-base-8");
  const fs::path dir = scratch_dir("barrier_host");
  fs::create_directories(dir);
  auto write_kernels = [&](const std::string& name, double dispatch_s, double combine_s) {
    std::string barriers;
    if (dispatch_s > 0) barriers += absl::StrFormat("host_dispatch,4,0,0,%.9g\n", dispatch_s);
    if (combine_s > 0) barriers += absl::StrFormat("host_combine,4,0,0,%.9g\n", combine_s);
    return write_switch_kernels(dir / name, c, barriers);
  };
  const actors::RunOutcome plain = switch_run("sync", write_kernels("plain.csv", 0, 0));
  const actors::RunOutcome slow = switch_run("sync", write_kernels("barriers.csv", 1e-3, 0.5e-3));
  const double added_ms = c.num_layers * (1.0 + 0.5);
  EXPECT_NEAR(slow.metrics.itl.mean_ms - plain.metrics.itl.mean_ms, added_ms, 0.02 * added_ms);
  EXPECT_GT(slow.metrics.ttft.mean_ms, plain.metrics.ttft.mean_ms + added_ms * 0.98);
  ASSERT_EQ(slow.outputs.size(), plain.outputs.size());
  for (size_t i = 0; i < slow.outputs.size(); ++i) {
    EXPECT_EQ(slow.outputs[i].output, plain.outputs[i].output);
  }
}

// A measured grant time (`host_grant`): the device actor's grant reaches the stage that much
// later. Under sync a device holds 4 of switch-base-8's experts; after a dispatch the first
// expert stage with rows starts on the idle device on its own (no grant), each further one is
// granted when the one before it is done, so a decode iteration grows by 1 to 3 grants per
// layer (the slower device's); attention and sampler runs start on their own. Tokens equal.
TEST(Sim, GrantHostTimeDelaysEachGrantedStart) {
  const engine::model::ModelConfig c = *engine::model::model_preset("switch-base-8");
  const fs::path dir = scratch_dir("grant_host");
  fs::create_directories(dir);
  const double grant_ms = 0.5;
  const actors::RunOutcome plain =
      switch_run("sync", write_switch_kernels(dir / "plain.csv", c, ""));
  const actors::RunOutcome slow = switch_run(
      "sync", write_switch_kernels(dir / "grant.csv", c,
                                   absl::StrFormat("host_grant,1,0,0,%.9g\n", grant_ms * 1e-3)));
  const double added_ms = slow.metrics.itl.mean_ms - plain.metrics.itl.mean_ms;
  EXPECT_GE(added_ms, 0.98 * c.num_layers * grant_ms);
  EXPECT_LE(added_ms, 1.02 * 3 * c.num_layers * grant_ms);
  ASSERT_EQ(slow.outputs.size(), plain.outputs.size());
  for (size_t i = 0; i < slow.outputs.size(); ++i) {
    EXPECT_EQ(slow.outputs[i].output, plain.outputs[i].output);
  }
}

// The measured run spread (`# spread_<kind>=σ` of `[cost] kernels`): each stage run's time is a
// mean-1 draw around its modeled time. Under sync every layer's combine waits for the slower
// of the two devices' expert runs, so with σ = 0.3 the inter-token latency grows (E[max] of
// two draws is above their mean) while the devices' busy time stays near the mean's; the same
// seed gives the same run, another seed another, seed 0 none; the tokens never change.
TEST(Sim, MeasuredRunSpreadDelaysBarriersKeepsMeanBusyTimeAndIsDeterministic) {
  const engine::model::ModelConfig c = *engine::model::model_preset("switch-base-8");
  const fs::path dir = scratch_dir("run_spread");
  fs::create_directories(dir);
  const std::string plain_csv = write_switch_kernels(dir / "plain.csv", c, "");
  const std::string spread_csv = write_switch_kernels(
      dir / "spread.csv", c, "# spread_attention=0.3 spread_expert=0.3 spread_sampler=0.3\n");
  const actors::RunOutcome plain = switch_run("sync", plain_csv);
  const actors::RunOutcome spread = switch_run("sync", spread_csv);
  const actors::RunOutcome again = switch_run("sync", spread_csv);
  const actors::RunOutcome other = switch_run("sync", spread_csv, false, /*spread_seed=*/2);
  const actors::RunOutcome off = switch_run("sync", spread_csv, false, /*spread_seed=*/0);
  EXPECT_EQ(again.metrics.duration_s, spread.metrics.duration_s);
  EXPECT_EQ(again.metrics.itl.mean_ms, spread.metrics.itl.mean_ms);
  EXPECT_NE(other.metrics.duration_s, spread.metrics.duration_s);
  EXPECT_EQ(off.metrics.duration_s, plain.metrics.duration_s);
  EXPECT_EQ(off.metrics.itl.mean_ms, plain.metrics.itl.mean_ms);
  for (const actors::RunOutcome* o : {&spread, &other}) {
    EXPECT_GT(o->metrics.itl.mean_ms, plain.metrics.itl.mean_ms * 1.03);
    double busy = 0, busy_plain = 0;
    for (size_t d = 0; d < 2; ++d) {
      busy += o->metrics.device_busy_pct[d] * o->metrics.duration_s;
      busy_plain += plain.metrics.device_busy_pct[d] * plain.metrics.duration_s;
    }
    EXPECT_NEAR(busy / busy_plain, 1.0, 0.1);
    std::printf("itl %.4f ms (no spread %.4f ms); busy %.6f s (no spread %.6f s)\n",
                o->metrics.itl.mean_ms, plain.metrics.itl.mean_ms, busy, busy_plain);
    ASSERT_EQ(o->outputs.size(), plain.outputs.size());
    for (size_t i = 0; i < plain.outputs.size(); ++i) {
      EXPECT_EQ(o->outputs[i].output, plain.outputs[i].output);
    }
  }
  // Shared runs (expert_alone rows: async's expert runs share the node's bandwidth, their ends
  // moving with the other device's runs) are scaled whole: deterministic, near the mean, the
  // same tokens.
  const std::string shared_csv = write_switch_kernels(
      dir / "shared.csv", c,
      "# spread_attention=0.3 spread_expert=0.3 spread_sampler=0.3\n" + expert_alone_rows(c, 0.5));
  const actors::RunOutcome shared_off = switch_run("async", shared_csv, false, 0);
  const actors::RunOutcome shared = switch_run("async", shared_csv);
  const actors::RunOutcome shared_again = switch_run("async", shared_csv);
  EXPECT_EQ(shared_again.metrics.duration_s, shared.metrics.duration_s);
  EXPECT_NE(shared.metrics.duration_s, shared_off.metrics.duration_s);
  const double busy_shared = shared.metrics.device_busy_pct[1] * shared.metrics.duration_s;
  const double busy_off = shared_off.metrics.device_busy_pct[1] * shared_off.metrics.duration_s;
  EXPECT_NEAR(busy_shared / busy_off, 1.0, 0.15);
  ASSERT_EQ(shared.outputs.size(), shared_off.outputs.size());
  for (size_t i = 0; i < shared.outputs.size(); ++i) {
    EXPECT_EQ(shared.outputs[i].output, shared_off.outputs[i].output);
  }
}

}  // namespace
}  // namespace muflow
