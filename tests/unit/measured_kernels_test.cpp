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

// Prefill attention follows the measured curve over (query, key) pairs, not one slope: the
// rows below are quadratic in the pairs, so a slope fitted through them misses the middle.
// Host time rows (host_*) interpolate per stage or barrier kind; a kind without rows costs 0.
TEST(MeasuredKernelsTest, PrefillFollowsTheMeasuredCurveAndHostTimesInterpolate) {
  std::string text = std::string(kMeta) + "op,tokens,context,width,seconds\n";
  auto row = [&](const std::string& op, int n, int c, int w, double us) {
    text += absl::StrFormat("%s,%d,%d,%d,%.12g\n", op, n, c, w, us * 1e-6);
  };
  auto pairs = [](double p) { return p * p - p * (p - 1) / 2 - p; };  // one sequence from 0
  for (int n : {1, 64}) row("attention", n, 1, 0, 10);                // T0 = 10 µs flat
  for (int p : {8, 32, 64}) row("prefill", p, p, 0, 10 + 1e-3 * pairs(p) * pairs(p));
  for (int n : {1, 8}) row("expert", n, 0, 128, 20);
  for (int n : {1, 8}) row("lm_head", n, 0, 0, 5);
  row("host_attention", 1, 0, 0, 40);
  row("host_attention", 16, 0, 0, 100);
  row("host_sampler", 4, 0, 0, 70);
  row("host_dispatch", 8, 0, 0, 30);
  row("host_dispatch", 64, 0, 0, 100);
  row("host_grant", 1, 0, 0, 25);
  row("host_expert", 1, 0, 0, -30);  // a correction: the kernel rows over-estimate 1 row
  row("host_expert", 3, 0, 0, 10);
  absl::StatusOr<MeasuredKernels> m =
      MeasuredKernels::read_csv(write("measured_prefill.csv", text));
  ASSERT_TRUE(m.ok()) << m.status();
  // At a measured point the curve is exact; between two points it is their interpolation.
  const std::vector<AttentionSequence> at32 = {{32, 32}};
  EXPECT_NEAR(m->attention_seconds(at32), (10 + 1e-3 * pairs(32) * pairs(32)) * 1e-6, 1e-12);
  const double x = (pairs(8) + pairs(32)) / 2;
  const double core = (1e-3 * pairs(8) * pairs(8) + 1e-3 * pairs(32) * pairs(32)) / 2;
  // A 4-token chunk at the end of a 68-token context: 4·68 − 6 − 4 = 262 pairs = x.
  ASSERT_EQ(x, 262.0);
  const std::vector<AttentionSequence> mid = {{4, 68}};
  EXPECT_NEAR(m->attention_seconds(mid), (10 + core) * 1e-6, 1e-12);
  using K = MeasuredKernels::RunKind;
  EXPECT_NEAR(m->host_seconds(K::kAttention, 1), 40e-6, 1e-15);
  EXPECT_NEAR(m->host_seconds(K::kAttention, 6), 60e-6, 1e-12);  // 40 + 5 * 4
  EXPECT_NEAR(m->host_seconds(K::kSampler, 9), 70e-6, 1e-15);    // one point: flat
  EXPECT_NEAR(m->host_seconds(K::kExpert, 1), -30e-6, 1e-15);    // negative where measured so
  EXPECT_NEAR(m->host_seconds(K::kExpert, 2), -10e-6, 1e-12);    // -30 + 40 / 2
  EXPECT_EQ(m->host_seconds(K::kAttention, 0), 0.0);             // no token, no run
  EXPECT_NEAR(m->host_seconds(K::kDispatch, 36), 65e-6, 1e-12);  // 30 + 70 · 28 / 56
  EXPECT_EQ(m->host_seconds(K::kCombine, 36), 0.0);              // no rows
  EXPECT_NEAR(m->host_seconds(K::kGrant, 1), 25e-6, 1e-15);      // a grant: one flat row
}

// Expert rows timed alone (the other measuring threads idle) and beside them: the time
// moves linearly from the alone row to the concurrent one with the share of the other
// measured threads' devices busy; without alone rows the share changes nothing.
TEST(MeasuredKernelsTest, ExpertTimeFollowsTheShareOfBusyNeighbours) {
  std::string text = model_file();
  const size_t at = text.find("concurrent=1");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 12, "concurrent=3");
  const std::string without = text;
  for (int n : {1, 8, 64}) {
    text += absl::StrFormat("expert_alone,%d,0,128,%.12g\n", n, (10 + 2.0 * n) * 1e-6);
  }
  absl::StatusOr<MeasuredKernels> m = MeasuredKernels::read_csv(write("measured_alone.csv", text));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->concurrent(), 3);
  EXPECT_TRUE(m->has_expert_alone());
  EXPECT_NEAR(m->expert_seconds(8, 128), (20 + 24.0) * 1e-6, 1e-12);  // default: beside
  EXPECT_NEAR(m->expert_seconds(8, 128, 1.0), (20 + 24.0) * 1e-6, 1e-12);
  EXPECT_NEAR(m->expert_seconds(8, 128, 0.0), (10 + 16.0) * 1e-6, 1e-12);  // alone
  EXPECT_NEAR(m->expert_seconds(8, 128, 0.5), (26 + 0.5 * 18) * 1e-6, 1e-12);
  EXPECT_NEAR(m->expert_seconds(8, 128, 7.0), (20 + 24.0) * 1e-6, 1e-12);     // clamped
  EXPECT_NEAR(m->expert_seconds(8, 64, 0.0), (10 + 16.0) * 1e-6 / 2, 1e-12);  // half width
  EXPECT_EQ(m->expert_seconds(0, 128, 0.0), 0.0);

  absl::StatusOr<MeasuredKernels> plain =
      MeasuredKernels::read_csv(write("measured_beside.csv", without));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->has_expert_alone());
  EXPECT_EQ(plain->expert_seconds(8, 128, 0.0), plain->expert_seconds(8, 128, 1.0));
}

// A table of corrections keeps its sign between and beyond its points, but never goes below its
// most negative point (a long run beyond the rows must not be corrected to nothing); a table of
// times is clamped at 0.
TEST(MeasuredKernelsTest, SignedTablesStopAtTheirMostNegativePoint) {
  const InterpolatedTimes correction({{1, -10e-6}, {3, -40e-6}}, /*signed_values=*/true);
  EXPECT_NEAR(correction.at(2), -25e-6, 1e-15);
  EXPECT_NEAR(correction.at(100), -40e-6, 1e-15);
  const InterpolatedTimes rising({{1, -10e-6}, {3, 30e-6}}, /*signed_values=*/true);
  EXPECT_NEAR(rising.at(2), 10e-6, 1e-15);
  EXPECT_NEAR(rising.at(5), 70e-6, 1e-15);  // extrapolated upwards as before
  const InterpolatedTimes times({{1, 30e-6}, {3, 10e-6}});
  EXPECT_EQ(times.at(100), 0.0);
}

// The runs' spread is `# spread_<kind>=σ` metadata (a comment line anywhere, as calibrate
// appends it after the host rows), per stage kind; none for barriers and grants; absent: 0.
// A value outside [0, kMaxRunSpread] or not a number is refused naming the key.
TEST(MeasuredKernelsTest, RunSpreadIsReadPerStageKindFromTheMetadata) {
  using K = MeasuredKernels::RunKind;
  absl::StatusOr<MeasuredKernels> none =
      MeasuredKernels::read_csv(write("measured_spread0.csv", model_file()));
  ASSERT_TRUE(none.ok()) << none.status();
  for (K k : MeasuredKernels::kRunKinds) EXPECT_EQ(none->run_spread(k), 0.0);
  absl::StatusOr<MeasuredKernels> m = MeasuredKernels::read_csv(
      write("measured_spread.csv",
            model_file() + "# spread_attention=0.15 spread_expert=0.12 spread_sampler=0.0937\n"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->run_spread(K::kAttention), 0.15);
  EXPECT_EQ(m->run_spread(K::kExpert), 0.12);
  EXPECT_EQ(m->run_spread(K::kSampler), 0.0937);
  EXPECT_EQ(m->run_spread(K::kDispatch), 0.0);
  EXPECT_EQ(m->run_spread(K::kGrant), 0.0);
  EXPECT_EQ(run_spread_key(K::kCombine), nullptr);
  for (const std::string bad :
       {"spread_expert=-0.1", "spread_expert=1.5", "spread_sampler=x", "spread_attention=inf"}) {
    absl::StatusOr<MeasuredKernels> b = MeasuredKernels::read_csv(
        write("measured_bad_spread.csv", model_file() + "# " + bad + "\n"));
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("'" + bad + "'")) << bad;
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("expected a number in [0, 1]"));
  }
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
           {head + "stage_overhead,0,0,0,1e308\n", ":3: seconds must be a number in [0, 3600]"},
           {head + "prefill,8,4,0,0.1\n", ":3: context must be"},
           {head + "host_expert,0,0,0,0.1\n", ":3: tokens must be >= 1"},
           // Only the in-run stage rows are corrections that may be negative; gaps may not.
           {head + "host_dispatch,4,0,0,-1e-5\n",
            ":3: seconds must be a number in [0, 3600] (only host_attention"},
           {head + "expert,4,0,128,-1e-5\n", ":3: seconds must be a number in [0, 3600]"},
           {head + "host_expert,4,0,0,-1e308\n", ":3: seconds must be a number in [-3600, 3600]"},
           {head + "expert_alone,4,0,0,0.1\n", ":3: expert width must be >= 1"},
           {head + "attention,1,1,0,1e-5\nattention,2,1,0,2e-5\n", "need expert rows"},
           {"op,tokens,context,width,seconds\n", "no '# kind=...'"},
       }) {
    const std::string path = write("measured_bad.csv", b.text);
    absl::StatusOr<MeasuredKernels> m = MeasuredKernels::read_csv(path);
    ASSERT_FALSE(m.ok()) << b.text;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(b.expected)) << b.text;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr("measured_bad.csv"));
  }
  // A malformed `concurrent` metadata value (it scales the contention model).
  std::string bad_meta = model_file();
  bad_meta.replace(bad_meta.find("concurrent=1"), 12, "concurrent=0");
  absl::StatusOr<MeasuredKernels> m =
      MeasuredKernels::read_csv(write("measured_bad.csv", bad_meta));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("'concurrent=0'"));
  EXPECT_EQ(MeasuredKernels::read_csv("/nonexistent/k.csv").status().code(),
            absl::StatusCode::kNotFound);
  // A file past kMaxFileBytes is refused before it is read (here: one long comment line).
  const std::string big =
      model_file() + "# " + std::string(static_cast<size_t>(MeasuredKernels::kMaxFileBytes), 'x');
  absl::StatusOr<MeasuredKernels> huge = MeasuredKernels::read_csv(write("measured_big.csv", big));
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(std::string(huge.status().message()), HasSubstr("a kernel table is at most"));
}

}  // namespace
}  // namespace muflow::kernels::sim
