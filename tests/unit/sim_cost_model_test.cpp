// Tests for the sim backend's device cost model (kernels/sim/): device kinds, op costs, the
// roofline with its efficiency curve, and calibration against measured kernel times.
// Calibration on the real V100 Switch-expert CSV skips when MUFLOW_DATA_DIR lacks it.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/sim/cost_model.hpp"
#include "kernels/sim/device_kind.hpp"
#include "kernels/sim/kernel_time_csv.hpp"
#include "kernels/sim/op_cost.hpp"

namespace sim = muflow::kernels::sim;
using sim::FfnKind;
using sim::Precision;

namespace {

constexpr Precision kAllPrecisions[] = {Precision::kF32, Precision::kTF32, Precision::kF16,
                                        Precision::kBF16};

// Mixtral-8x7B expert dims.
constexpr int64_t kHidden = 4096;
constexpr int64_t kFfn = 14336;

sim::DeviceKind kind(const char* name) {
  absl::StatusOr<sim::DeviceKind> k = sim::find_device_kind(name);
  EXPECT_TRUE(k.ok()) << k.status();
  return *k;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/sim_cost_model_" + name;
  std::ofstream(path) << text;
  return path;
}

std::string v100_csv() {
  return std::string(MUFLOW_DATA_DIR) + "/kernels/v100-switch-expert-time-vs-tokens.csv";
}

}  // namespace

TEST(DeviceKind, EveryKindHasPositiveFieldsAndASource) {
  const std::vector<std::string> names = sim::device_kind_names();
  for (const char* required : {"H100-SXM", "H200", "A100-80GB", "A100-40GB", "V100-32GB", "cpu"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
  }
  ASSERT_EQ(names.size(), sim::device_kinds().size());
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const sim::DeviceKind k = kind(name.c_str());
    EXPECT_EQ(k.name, name);
    for (Precision p : kAllPrecisions) {
      EXPECT_GT(k.peak_flops(p), 0) << sim::precision_name(p);
      EXPECT_GE(k.peak_flops(p), k.peak_flops_f32) << "a tensor mode slower than FP32";
    }
    EXPECT_GT(k.hbm_bytes_per_s, 0);
    EXPECT_GT(k.memory_bytes, 0);
    EXPECT_GE(k.pcie_gen, 0);
    EXPECT_GT(k.host_link_bytes_per_s, 0);
    EXPECT_GT(k.intra_node_link_bytes_per_s, 0);
    EXPECT_GT(k.launch_overhead_s, 0);
    EXPECT_GT(k.efficiency.e_max, 0);
    EXPECT_LE(k.efficiency.e_max, 1);
    EXPECT_GE(k.efficiency.n_half, 0);
    EXPECT_GT(k.efficiency.mem_eff, 0);
    EXPECT_LE(k.efficiency.mem_eff, 1);
    EXPECT_FALSE(k.source.empty());
  }
  // Spot checks against the datasheets cited in device_kind.cpp.
  EXPECT_DOUBLE_EQ(kind("V100-32GB").peak_flops_f32, 15.7e12);
  EXPECT_DOUBLE_EQ(kind("A100-80GB").hbm_bytes_per_s, 2.039e12);
  EXPECT_DOUBLE_EQ(kind("H100-SXM").peak_flops(Precision::kBF16), 989.5e12);
  EXPECT_DOUBLE_EQ(kind("H200").hbm_bytes_per_s, 4.8e12);
}

TEST(DeviceKind, UnknownNameListsTheKnownOnes) {
  absl::StatusOr<sim::DeviceKind> k = sim::find_device_kind("H100");
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kNotFound);
  const std::string msg(k.status().message());
  EXPECT_NE(msg.find("'H100'"), std::string::npos) << msg;
  for (const std::string& name : sim::device_kind_names()) {
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
}

TEST(OpCost, FormulasOnSmallDims) {
  const sim::OpCost swiglu = sim::expert_ffn_cost(5, 8, 16, Precision::kF32, FfnKind::kSwiGlu);
  EXPECT_DOUBLE_EQ(swiglu.flops, 2.0 * 5 * 8 * 16 * 3);
  EXPECT_DOUBLE_EQ(swiglu.bytes, 4.0 * 3 * 8 * 16 + 4.0 * 5 * (2 * 8 + 6 * 16));
  EXPECT_EQ(swiglu.num_kernels, 3);
  const sim::OpCost two = sim::expert_ffn_cost(5, 8, 16, Precision::kBF16, FfnKind::kTwoLayer);
  EXPECT_DOUBLE_EQ(two.flops, 2.0 * 5 * 8 * 16 * 2);
  EXPECT_DOUBLE_EQ(two.bytes, 2.0 * 2 * 8 * 16 + 2.0 * 5 * (2 * 8 + 4 * 16));

  const sim::OpCost shared = sim::shared_expert_cost(5, 8, 16, Precision::kF32, true);
  EXPECT_DOUBLE_EQ(shared.flops, swiglu.flops + 2.0 * 5 * 8);
  EXPECT_EQ(shared.num_kernels, 4);

  const sim::OpCost router = sim::router_cost(5, 8, 4, Precision::kF32);
  EXPECT_DOUBLE_EQ(router.flops, 2.0 * 5 * 8 * 4);
  const sim::OpCost head = sim::lm_head_cost(5, 8, 100, Precision::kF32);
  EXPECT_DOUBLE_EQ(head.flops, 2.0 * 5 * 8 * 100);

  // Attention: hidden 8, 2 heads, 1 KV head, head_dim 4 -> q = 8, kv = 4.
  const sim::AttentionDims dims{.hidden = 8, .num_heads = 2, .num_kv_heads = 1, .head_dim = 4};
  const double proj = 2.0 * 8 * (8 + 2 * 4) + 2.0 * 8 * 8;  // per token
  // Prefill of 6 tokens: causal pairs 1+2+...+6 = 21.
  const sim::AttentionSequence prefill[] = {{.num_tokens = 6, .context_len = 6}};
  const sim::OpCost pre = sim::attention_cost(dims, prefill, Precision::kF32);
  EXPECT_DOUBLE_EQ(pre.flops, 6 * proj + 4.0 * 21 * 8);
  // Decode of two sequences with contexts 10 and 30: 40 pairs, KV rows read 40.
  const int64_t lens[] = {10, 30};
  const sim::OpCost dec = sim::decode_attention_cost(dims, lens, Precision::kF32);
  EXPECT_DOUBLE_EQ(dec.flops, 2 * proj + 4.0 * 40 * 8);
  const double weights = 4.0 * (8 * (8 + 2 * 4) + 8 * 8);
  const double acts = 4.0 * 2 * (3 * 8 + 2 * (8 + 2 * 4) + 2 * 8 + 8);
  EXPECT_DOUBLE_EQ(dec.bytes, weights + acts + 4.0 * 2 * 4 * 40 + 4.0 * 2 * 4 * 2);
  EXPECT_EQ(dec.num_kernels, 5);
  EXPECT_EQ(sim::decode_attention_cost(dims, {}, Precision::kF32).num_kernels, 0);
}

TEST(CostModel, OneTokenExpertFfnIsMemoryBound) {
  for (const char* name : {"H100-SXM", "V100-32GB", "A100-40GB"}) {
    SCOPED_TRACE(name);
    const sim::DeviceKind k = kind(name);
    const Precision p = std::string(name) == "V100-32GB" ? Precision::kF16 : Precision::kBF16;
    const sim::OpCost op = sim::expert_ffn_cost(1, kHidden, kFfn, p);
    const double weight_bytes = 3.0 * kHidden * kFfn * 2;
    const double t = sim::seconds(k, p, op, 1);
    const double launch = 3 * k.launch_overhead_s;
    // time ≈ weight bytes / (HBM bandwidth · mem_eff), activations add < 0.1 %.
    const double expected = weight_bytes / (k.hbm_bytes_per_s * k.efficiency.mem_eff);
    EXPECT_NEAR(t - launch, expected, 1e-3 * expected);
    EXPECT_GT(t - launch, weight_bytes / k.hbm_bytes_per_s);  // never faster than the datasheet
    const double compute =
        op.flops * (1 + k.efficiency.n_half) / (k.peak_flops(p) * k.efficiency.e_max);
    EXPECT_LT(compute, 0.5 * expected) << "compute should be far below the memory term";
  }
}

TEST(CostModel, ManyTokensExpertFfnIsComputeBound) {
  for (const char* name : {"H100-SXM", "H200", "A100-80GB", "V100-32GB"}) {
    SCOPED_TRACE(name);
    const sim::DeviceKind k = kind(name);
    for (Precision p : {Precision::kF32, Precision::kF16}) {
      const int64_t n = 4096;
      const sim::OpCost op = sim::expert_ffn_cost(n, kHidden, kFfn, p);
      const double t = sim::seconds(k, p, op, n) - 3 * k.launch_overhead_s;
      const double compute =
          op.flops * (n + k.efficiency.n_half) / n / (k.peak_flops(p) * k.efficiency.e_max);
      const double memory = op.bytes / (k.hbm_bytes_per_s * k.efficiency.mem_eff);
      EXPECT_GT(compute, memory);
      EXPECT_NEAR(t, compute, 1e-12 * compute);
    }
  }
}

TEST(CostModel, MonotoneInTokensAndZeroForEmptyBatch) {
  const sim::AttentionDims dims{
      .hidden = kHidden, .num_heads = 32, .num_kv_heads = 8, .head_dim = 128};
  for (const sim::DeviceKind& k : sim::device_kinds()) {
    SCOPED_TRACE(k.name);
    for (Precision p : kAllPrecisions) {
      EXPECT_EQ(sim::seconds(k, p, sim::expert_ffn_cost(0, kHidden, kFfn, p), 0), 0);
      double prev_ffn = 0;
      double prev_attn = 0;
      double prev_router = 0;
      for (int64_t n = 1; n <= 5000; n += (n < 64 ? 1 : 37)) {
        const double ffn = sim::seconds(k, p, sim::expert_ffn_cost(n, kHidden, kFfn, p), n);
        std::vector<int64_t> lens(static_cast<size_t>(n), 1024);
        const double attn = sim::seconds(k, p, sim::decode_attention_cost(dims, lens, p), n);
        const double router = sim::seconds(k, p, sim::router_cost(n, kHidden, 8, p), n);
        EXPECT_GE(ffn, prev_ffn) << n;
        EXPECT_GE(attn, prev_attn) << n;
        EXPECT_GE(router, prev_router) << n;
        prev_ffn = ffn;
        prev_attn = attn;
        prev_router = router;
      }
    }
  }
}

TEST(CostModel, H100IsFasterThanV100ForTheSameOp) {
  const sim::DeviceKind h100 = kind("H100-SXM");
  const sim::DeviceKind v100 = kind("V100-32GB");
  const sim::DeviceKind a100 = kind("A100-80GB");
  for (Precision p : kAllPrecisions) {
    for (int64_t n : {1, 16, 256, 4096}) {
      const sim::OpCost op = sim::expert_ffn_cost(n, kHidden, kFfn, p);
      EXPECT_LT(sim::seconds(h100, p, op, n), sim::seconds(a100, p, op, n));
      EXPECT_LT(sim::seconds(a100, p, op, n), sim::seconds(v100, p, op, n));
      const sim::OpCost head = sim::lm_head_cost(n, kHidden, 32000, p);
      EXPECT_LT(sim::seconds(h100, p, head, n), sim::seconds(v100, p, head, n));
    }
  }
}

TEST(CostModel, IsAPlainDeterministicValue) {
  sim::CostModel model;
  const sim::DeviceKind k = kind("A100-40GB");
  const sim::OpCost op = sim::expert_ffn_cost(300, kHidden, kFfn, Precision::kBF16);
  const double before = model.seconds(k, Precision::kBF16, op, 300);
  EXPECT_EQ(before, sim::seconds(k, Precision::kBF16, op, 300));
  model.set_timing(
      k.name, Precision::kBF16,
      {.launch_overhead_s = 1e-3, .curve = {.e_max = 0.5, .n_half = 0, .mem_eff = 0.5}});
  const sim::CostModel copy = model;
  EXPECT_EQ(copy.seconds(k, Precision::kBF16, op, 300),
            model.seconds(k, Precision::kBF16, op, 300));
  EXPECT_GT(model.seconds(k, Precision::kBF16, op, 300), before + 2e-3);
  // Other precisions and kinds keep their defaults.
  EXPECT_EQ(model.seconds(k, Precision::kF16, op, 300), sim::seconds(k, Precision::kF16, op, 300));
}

TEST(Calibration, RecoversKnownParametersFromSyntheticTimes) {
  const sim::DeviceKind k = kind("A100-80GB");
  const sim::KernelTiming truth{.launch_overhead_s = 10e-6,
                                .curve = {.e_max = 0.7, .n_half = 4, .mem_eff = 0.85}};
  // A100 f32, 1024 -> 4096 -> 1024: compute 1.23 us · (n + 4) vs the weight stream 19.4 us, so
  // rows below ~12 tokens are memory-bound and pin down the launch overhead.
  std::vector<sim::KernelTimeSample> samples;
  int line = 2;
  for (int64_t n : {1, 2, 4, 8, 16, 24, 32, 48, 64, 128, 256, 512, 1024, 2048}) {
    const sim::OpCost op = sim::expert_ffn_cost(n, 1024, 4096, Precision::kF32, FfnKind::kTwoLayer);
    samples.push_back({.num_tokens = n,
                       .seconds = sim::roofline_seconds(k, truth, Precision::kF32, op, n),
                       .line = line++});
  }
  sim::CostModel model;
  absl::StatusOr<sim::CalibrationFit> fit = model.calibrate_expert_ffn(
      samples, "synthetic", 1024, 4096, FfnKind::kTwoLayer, k, Precision::kF32);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->timing.launch_overhead_s, 10e-6, 1e-9);
  EXPECT_NEAR(fit->timing.curve.e_max, 0.7, 1e-6);
  EXPECT_NEAR(fit->timing.curve.n_half, 4, 1e-4);
  EXPECT_LT(fit->max_rel_error, 1e-9);
  EXPECT_GT(fit->num_memory_bound, 0);
}

TEST(Calibration, ReproducesTheMeasuredV100SwitchExpert) {
  const std::string path = v100_csv();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent";
  const sim::DeviceKind v100 = kind("V100-32GB");
  sim::CostModel model;
  // Switch-base expert: 768 -> 3072 -> 768, ReLU, fp32 (../shared/data/README.md).
  absl::StatusOr<sim::CalibrationFit> fit =
      model.calibrate_expert_ffn(path, 768, 3072, FfnKind::kTwoLayer, v100, Precision::kF32);
  ASSERT_TRUE(fit.ok()) << fit.status();
  std::printf(
      "[fit] V100 Switch expert: %lld rows (%lld skipped, %lld memory-bound), "
      "L = %.4f ms, launch = %.2f us/kernel, e_max = %.3f (%.2f TFLOP/s), "
      "n_half = %.2f; rel. error mean %.2f%%, rms %.2f%%, max %.2f%% at %lld tokens\n",
      static_cast<long long>(fit->num_samples), static_cast<long long>(fit->num_skipped),
      static_cast<long long>(fit->num_memory_bound), fit->fixed_overhead_s * 1e3,
      fit->timing.launch_overhead_s * 1e6, fit->timing.curve.e_max,
      fit->timing.curve.e_max * v100.peak_flops_f32 / 1e12, fit->timing.curve.n_half,
      fit->mean_rel_error * 100, fit->rms_rel_error * 100, fit->max_rel_error * 100,
      static_cast<long long>(fit->max_rel_error_tokens));
  EXPECT_EQ(fit->num_samples, 1004);
  EXPECT_EQ(fit->num_skipped, 1);
  EXPECT_LT(fit->mean_rel_error, 0.06);
  EXPECT_LT(fit->max_rel_error, 0.25);
  EXPECT_GT(fit->timing.curve.e_max, 0.6);
  EXPECT_LE(fit->timing.curve.e_max, 1.0);
  // The model now uses the fit.
  const sim::KernelTiming used = model.timing(v100, Precision::kF32);
  EXPECT_EQ(used.curve.e_max, fit->timing.curve.e_max);
  EXPECT_EQ(used.launch_overhead_s, fit->timing.launch_overhead_s);

  // 1024 tokens (not a row of the file): within 15 % of the measurements at 1020 and 1030.
  absl::StatusOr<std::vector<sim::KernelTimeSample>> rows = sim::read_kernel_times_csv(path);
  ASSERT_TRUE(rows.ok()) << rows.status();
  double t1020 = 0;
  double t1030 = 0;
  for (const sim::KernelTimeSample& s : *rows) {
    if (s.num_tokens == 1020) t1020 = s.seconds;
    if (s.num_tokens == 1030) t1030 = s.seconds;
  }
  ASSERT_GT(t1020, 0);
  ASSERT_GT(t1030, 0);
  const double measured = t1020 + (t1030 - t1020) * 0.4;
  const double predicted = model.seconds(
      v100, Precision::kF32,
      sim::expert_ffn_cost(1024, 768, 3072, Precision::kF32, FfnKind::kTwoLayer), 1024);
  std::printf("[fit] 1024 tokens: predicted %.4f ms, measured (interpolated) %.4f ms\n",
              predicted * 1e3, measured * 1e3);
  EXPECT_NEAR(predicted, measured, 0.15 * measured);
}

TEST(Calibration, HeldOutRowsOfTheV100FileArePredicted) {
  const std::string path = v100_csv();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent";
  absl::StatusOr<std::vector<sim::KernelTimeSample>> rows = sim::read_kernel_times_csv(path);
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::vector<sim::KernelTimeSample> train, test;
  for (size_t i = 0; i < rows->size(); ++i) ((i % 2 == 0) ? train : test).push_back((*rows)[i]);
  const sim::DeviceKind v100 = kind("V100-32GB");
  sim::CostModel model;
  ASSERT_TRUE(model
                  .calibrate_expert_ffn(train, "even rows", 768, 3072, FfnKind::kTwoLayer, v100,
                                        Precision::kF32)
                  .ok());
  double sum = 0;
  int count = 0;
  for (const sim::KernelTimeSample& s : test) {
    if (s.num_tokens == 0) continue;
    const double p = model.seconds(
        v100, Precision::kF32,
        sim::expert_ffn_cost(s.num_tokens, 768, 3072, Precision::kF32, FfnKind::kTwoLayer),
        s.num_tokens);
    sum += std::abs(p - s.seconds) / s.seconds;
    ++count;
  }
  std::printf("[fit] held-out odd rows: mean rel. error %.2f%% over %d rows\n", 100 * sum / count,
              count);
  EXPECT_LT(sum / count, 0.06);
}

TEST(Calibration, MalformedCsvNamesFileAndLine) {
  const sim::DeviceKind v100 = kind("V100-32GB");
  struct Case {
    const char* name;
    const char* text;
    const char* expect;  // substring of the message after the path
  };
  const Case cases[] = {
      {"bad_time", ",num_toks,time\n0,1,0.2\n1,2,0.3\n2,3,abc\n", ":4: time 'abc'"},
      {"bad_tokens", ",num_toks,time\n0,1,0.2\n1,-2,0.3\n", ":3: num_toks '-2'"},
      {"fields", ",num_toks,time\n0,1,0.2\n1,2\n", ":3: expected 3 fields"},
      {"header", "a,b,c\n0,1,0.2\n", ":1: header"},
      {"empty", "\n\n", "empty file"},
      {"no_rows", ",num_toks,time\n", "no data rows"},
      {"zero_time", ",num_toks,time\n0,1,0.2\n1,2,0\n2,3,0.4\n", ":3: time 0 for 2 tokens"},
      {"too_few", ",num_toks,time\n0,1,0.2\n1,2,0.3\n", "at least 3 distinct"},
      {"nan", ",num_toks,time\n0,1,nan\n", ":2: time 'nan'"},
      // 1e-6 ms for 10,000 tokens is far faster than a V100's peak.
      {"too_fast", "num_tokens,time_ms\n1,0.0000001\n100,0.0000005\n10000,0.000001\n",
       "exceeds the f32 peak"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = write_temp(std::string(c.name) + ".csv", c.text);
    sim::CostModel model;
    absl::StatusOr<sim::CalibrationFit> fit =
        model.calibrate_expert_ffn(path, 768, 3072, FfnKind::kTwoLayer, v100, Precision::kF32);
    ASSERT_FALSE(fit.ok());
    EXPECT_EQ(fit.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string msg(fit.status().message());
    EXPECT_EQ(msg.rfind(path, 0), 0u) << msg;
    EXPECT_NE(msg.find(c.expect), std::string::npos) << msg;
    // The model is unchanged on error.
    EXPECT_EQ(model.timing(v100, Precision::kF32).curve.e_max, v100.efficiency.e_max);
  }
  sim::CostModel model;
  absl::StatusOr<sim::CalibrationFit> missing = model.calibrate_expert_ffn(
      "/nonexistent/times.csv", 768, 3072, FfnKind::kTwoLayer, v100, Precision::kF32);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/times.csv"), std::string::npos);
}

TEST(KernelTimeCsv, ReadsCrlfBlankLinesAndExtraColumns) {
  const std::string path =
      write_temp("crlf.csv", "id,num_tokens,note,time_ms\r\n\r\n7,16,x,0.5\r\n8,32,y,1.25\r\n");
  absl::StatusOr<std::vector<sim::KernelTimeSample>> rows = sim::read_kernel_times_csv(path);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].num_tokens, 16);
  EXPECT_DOUBLE_EQ((*rows)[0].seconds, 0.5e-3);
  EXPECT_EQ((*rows)[0].line, 3);
  EXPECT_EQ((*rows)[1].num_tokens, 32);
  EXPECT_DOUBLE_EQ((*rows)[1].seconds, 1.25e-3);
}
