// Measured kernel tables for the sim (kernels/sim/measured_kernels.hpp): the fit recovers a
// known model from a file, lookups interpolate and extrapolate as documented, and bad files
// are refused with the file and line.

#include "kernels/sim/measured_kernels.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "scratch_path.hpp"

namespace muflow::kernels::sim {
namespace {

using ::testing::HasSubstr;

constexpr char kMeta[] =
    "# kind=cpu hidden=64 ffn=128 heads=4 kv_heads=2 head_dim=16 experts=4 topk=2 vocab=256 "
    "gated=1 dtype=f32 threads=1 concurrent=1\n";

std::string write(const std::string& name, const std::string& text) {
  const std::string path = muflow::testing::scratch_path(name).string();
  std::ofstream(path) << text;
  return path;
}

// A file generated from T0(n) = 10 + 2n µs, k_decode = 0.5 µs, k_prefill = 0.25 µs per
// (query, key) pair, expert 20 + 3n µs, LM head 5 + n µs, 7 µs stage overhead.
std::string model_file() {
  std::string text =
      std::string("# muflow calibrate: test\n") + kMeta + "op,tokens,context,width,seconds\n";
  auto row = [&](const std::string& op, int n, int c, int w, double us) {
    text += op + "," + std::to_string(n) + "," + std::to_string(c) + "," + std::to_string(w) + "," +
            absl::StrFormat("%.12g", us * 1e-6) + "\n";
  };
  for (int n : {1, 4, 16}) {
    row("attention", n, 1, 0, 10 + 2.0 * n);
    for (int c : {32, 128}) row("attention", n, c, 0, 10 + 2.0 * n + 0.5 * n * (c - 1));
  }
  for (int p : {8, 32}) row("prefill", p, p, 0, 10 + 2.0 * p + 0.25 * (p * (p - 1) / 2.0));
  for (int n : {1, 8, 64}) row("expert", n, 0, 128, 20 + 3.0 * n);
  for (int n : {1, 8}) row("lm_head", n, 0, 0, 5 + 1.0 * n);
  row("stage_overhead", 0, 0, 0, 7);
  return text;
}

TEST(MeasuredKernelsTest, FitRecoversTheModelThatWroteTheFile) {
  absl::StatusOr<MeasuredKernels> m =
      MeasuredKernels::read_csv(write("measured_ok.csv", model_file()));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->kind(), "cpu");
  EXPECT_EQ(m->meta().at("hidden"), "64");
  EXPECT_NEAR(m->k_decode(), 0.5e-6, 1e-12);
  EXPECT_NEAR(m->k_prefill(), 0.25e-6, 1e-12);
  EXPECT_NEAR(m->stage_overhead_s(), 7e-6, 1e-15);
  // Decode: 3 sequences at contexts 10, 20, 30 (n = 3): T0(3) + k · Σ (c − 1).
  const std::vector<AttentionSequence> decode = {{1, 10}, {1, 20}, {1, 30}};
  EXPECT_NEAR(m->attention_seconds(decode), (10 + 2 * 3 + 0.5 * (9 + 19 + 29)) * 1e-6, 1e-12);
  // A prefill chunk of 8 tokens at the end of a 24-token context plus one decode token.
  const std::vector<AttentionSequence> mixed = {{8, 24}, {1, 5}};
  const double pairs = 8.0 * 24 - 8.0 * 7 / 2 - 8;
  EXPECT_NEAR(m->attention_seconds(mixed), (10 + 2 * 9 + 0.25 * pairs + 0.5 * 4) * 1e-6, 1e-12);
  EXPECT_EQ(m->attention_seconds(std::vector<AttentionSequence>{}), 0.0);
  // Experts: interpolation, extrapolation past the last point, width scaling.
  EXPECT_NEAR(m->expert_seconds(4, 128), (20 + 3.0 * 4) * 1e-6, 1e-12);
  EXPECT_NEAR(m->expert_seconds(100, 128), (20 + 3.0 * 100) * 1e-6, 1e-12);
  EXPECT_NEAR(m->expert_seconds(4, 64), (20 + 3.0 * 4) * 1e-6 / 2, 1e-12);
  EXPECT_EQ(m->expert_seconds(0, 128), 0.0);
  EXPECT_NEAR(m->lm_head_seconds(3), 8e-6, 1e-12);
  EXPECT_EQ(m->lm_head_seconds(0), 0.0);
}

TEST(MeasuredKernelsTest, BadFilesAreRefusedWithFileAndLine) {
  struct Bad {
    std::string text, expected;
  };
  const std::string head = std::string(kMeta) + "op,tokens,context,width,seconds\n";
  for (const Bad& b : std::vector<Bad>{
           {std::string(kMeta) + "op,n,seconds\n", ":2: expected the header"},
           {head + "attention,1,1,0\n", ":3: expected 5 fields"},
           {head + "softmax,1,1,0,0.1\n", ":3: unknown op 'softmax'"},
           {head + "expert,-1,0,128,0.1\n", ":3: tokens, context and width"},
           {head + "expert,4,0,128,nan\n", ":3: seconds must be"},
           {head + "prefill,8,4,0,0.1\n", ":3: context must be"},
           {head + "attention,1,1,0,1e-5\nattention,2,1,0,2e-5\n", "need expert rows"},
           {"op,tokens,context,width,seconds\n", "no '# kind=...'"},
       }) {
    const std::string path = write("measured_bad.csv", b.text);
    absl::StatusOr<MeasuredKernels> m = MeasuredKernels::read_csv(path);
    ASSERT_FALSE(m.ok()) << b.text;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(b.expected)) << b.text;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr("measured_bad.csv"));
  }
  EXPECT_EQ(MeasuredKernels::read_csv("/nonexistent/k.csv").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace muflow::kernels::sim
