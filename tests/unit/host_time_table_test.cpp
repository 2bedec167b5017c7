// kernels/sim/host_time_table.hpp: the in-run host time rows `muflow calibrate` writes
// (#19 item 3): buckets, the trimmed mean, round 0 from the excess, refinements from a replay's
// residuals, and that the rows it writes are read back by MeasuredKernels as written.
#include "kernels/sim/host_time_table.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scratch_path.hpp"

namespace muflow::kernels::sim {
namespace {

using Kind = MeasuredKernels::RunKind;
using Samples = HostTimeTable::Samples;

// `table`'s rows after a small kernel table, written to a scratch CSV and read back by
// MeasuredKernels as the sim reads a calibration.
absl::StatusOr<MeasuredKernels> read_back(const HostTimeTable& table, const std::string& name) {
  const std::filesystem::path path = muflow::testing::scratch_path(name);
  {
    std::ofstream out(path);
    out << "# kind=cpu hidden=64 ffn=128 heads=4 kv_heads=2 head_dim=16 experts=4 topk=2 "
           "vocab=64 gated=1 dtype=f32 threads=1 concurrent=1\n"
           "op,tokens,context,width,seconds\n"
           "attention,1,1,0,0.0001\nattention,4,1,0,0.00012\nattention,4,64,0,0.0002\n"
           "prefill,8,8,0,0.0003\n"
           "prefill,32,32,0,0.0009\nexpert,1,0,128,0.0001\nexpert,16,0,128,0.0004\n"
           "lm_head,1,0,0,0.0001\nlm_head,16,0,0,0.0002\nstage_overhead,0,0,0,0.000005\n"
        << table.rows();
  }
  absl::StatusOr<MeasuredKernels> read = MeasuredKernels::read_csv(path.string());
  std::filesystem::remove(path);
  return read;
}

TEST(HostTimeTable, EachDecodeSizeHasItsOwnBucketThenOnePerPowerOfTwo) {
  for (int64_t n = 1; n <= 8; ++n) EXPECT_EQ(host_time_bucket(n), n);
  EXPECT_EQ(host_time_bucket(9), host_time_bucket(15));
  EXPECT_LT(host_time_bucket(8), host_time_bucket(9));
  EXPECT_LT(host_time_bucket(15), host_time_bucket(16));
  EXPECT_EQ(host_time_bucket(16), host_time_bucket(31));
  EXPECT_LT(host_time_bucket(31), host_time_bucket(32));
  EXPECT_LT(host_time_bucket(int64_t{1} << 40), host_time_bucket((int64_t{1} << 40) * 2));
  int previous = 0;
  for (int64_t n = 1; n < 5000; ++n) {
    EXPECT_GE(host_time_bucket(n), previous) << n;
    previous = host_time_bucket(n);
  }
}

TEST(HostTimeTable, TrimmedMeanDropsOneSampleInFiftyOnEachSide) {
  // Fifty values: the lowest and the highest dropped; the mean of the rest.
  std::vector<double> v(48, 2.0);
  v.push_back(1000.0);  // a preemption
  v.push_back(0.0);
  EXPECT_DOUBLE_EQ(trimmed_mean(v), 2.0);
  // Ten to forty-nine values: one dropped at each end all the same.
  EXPECT_DOUBLE_EQ(trimmed_mean({100, 2, 2, 2, 2, 2, 2, 2, 2, -50}), 2.0);
  // Fewer than ten: nothing dropped (the plain mean), unlike the median.
  EXPECT_DOUBLE_EQ(trimmed_mean({1, 1, 1, 9}), 3.0);
  EXPECT_DOUBLE_EQ(median({1, 1, 1, 9}), 1.0);
  EXPECT_DOUBLE_EQ(trimmed_mean({7}), 7.0);
}

TEST(HostTimeTable, RoundZeroIsTheTrimmedMeanAtTheMedianSizeOfBucketsWithEnoughSamples) {
  Samples excess;
  // Expert runs of 4 tokens: a right-skewed excess (the median, 10 µs, is below the mean).
  for (double us : {10, 10, 10, 30, 40}) excess[{Kind::kExpert, 4}].emplace_back(4, us * 1e-6);
  // 9..15 tokens: sizes 9, 10, 12, 12, 15 → the row sits at 12.
  for (int64_t n : {9, 10, 12, 12, 15}) excess[{Kind::kExpert, 9}].emplace_back(n, 50e-6);
  // Too few samples: no row.
  for (int i = 0; i < 4; ++i) excess[{Kind::kAttention, 2}].emplace_back(2, 1e-6);
  // A negative excess: a grant is a gap, clamped at 0; an expert row keeps its sign.
  for (int i = 0; i < 5; ++i) excess[{Kind::kGrant, 0}].emplace_back(1, -20e-6);
  for (int i = 0; i < 5; ++i) excess[{Kind::kExpert, 1}].emplace_back(1, -30e-6);
  const HostTimeTable table(excess);
  EXPECT_EQ(table.size(), 4u);
  ASSERT_NE(table.row(Kind::kExpert, 1), nullptr);
  EXPECT_NEAR(table.row(Kind::kExpert, 1)->second, -30e-6, 1e-12);
  ASSERT_NE(table.row(Kind::kExpert, 4), nullptr);
  EXPECT_EQ(table.row(Kind::kExpert, 4)->first, 4);
  EXPECT_NEAR(table.row(Kind::kExpert, 4)->second, 20e-6, 1e-12);
  ASSERT_NE(table.row(Kind::kExpert, 9), nullptr);
  EXPECT_EQ(table.row(Kind::kExpert, 9)->first, 12);
  EXPECT_EQ(table.row(Kind::kAttention, 2), nullptr);
  ASSERT_NE(table.row(Kind::kGrant, 0), nullptr);
  EXPECT_EQ(table.row(Kind::kGrant, 0)->second, 0.0);
}

// Calibration asks for two samples per traced run: a bucket held by one run of each traced
// run gets no row (the sim interpolates its neighbours'), and no refinement makes one or moves
// a row on fewer residuals than that.
TEST(HostTimeTable, ABucketWithFewerSamplesThanAskedHasNoRowAndTheSimInterpolatesThere) {
  Samples excess;
  for (int i = 0; i < 16; ++i) {
    excess[{Kind::kExpert, host_time_bucket(40)}].emplace_back(40, 200e-6);
    excess[{Kind::kExpert, host_time_bucket(200)}].emplace_back(200, 800e-6);
  }
  // One 101-token run in each of eight traced runs, one of them preempted.
  for (int i = 0; i < 8; ++i) {
    excess[{Kind::kExpert, host_time_bucket(101)}].emplace_back(101, i == 0 ? 20e-3 : 500e-6);
  }
  const HostTimeTable lax(excess);  // kMinSamples: the 101-token bucket makes a row
  ASSERT_NE(lax.row(Kind::kExpert, host_time_bucket(101)), nullptr);
  EXPECT_NEAR(lax.row(Kind::kExpert, host_time_bucket(101))->second, (20e-3 + 7 * 500e-6) / 8,
              1e-12);
  // 0 is taken as 1: every bucket with a sample makes a row.
  EXPECT_EQ(HostTimeTable(excess, 0).size(), 3u);
  HostTimeTable table(excess, 16);
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.row(Kind::kExpert, host_time_bucket(101)), nullptr);
  ASSERT_NE(table.row(Kind::kExpert, host_time_bucket(200)), nullptr);
  // A refinement on eight residuals leaves the row where it is.
  Samples residual;
  for (int i = 0; i < 8; ++i)
    residual[{Kind::kExpert, host_time_bucket(200)}].emplace_back(200, 1e-3);
  EXPECT_EQ(table.refine(residual), 0.0);
  EXPECT_NEAR(table.row(Kind::kExpert, host_time_bucket(200))->second, 800e-6, 1e-12);
  // Read back, the 101-token run gets the interpolation of the 40- and 200-token rows.
  absl::StatusOr<MeasuredKernels> read = read_back(table, "host-time-sparse.csv");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_NEAR(read->host_seconds(Kind::kExpert, 101), 200e-6 + 600e-6 * 61.0 / 160.0, 1e-12);
}

TEST(HostTimeTable, ARefinementMovesEachRowByItsResidualAndReportsTheLargestMove) {
  Samples excess;
  for (int i = 0; i < 5; ++i) {
    excess[{Kind::kExpert, 1}].emplace_back(1, 40e-6);
    excess[{Kind::kExpert, 2}].emplace_back(2, 60e-6);
    excess[{Kind::kCombine, 4}].emplace_back(4, 30e-6);
  }
  HostTimeTable table(excess);
  Samples residual;
  for (int i = 0; i < 5; ++i) {
    residual[{Kind::kExpert, 1}].emplace_back(1, 15e-6);   // the replay still too fast
    residual[{Kind::kExpert, 2}].emplace_back(2, -80e-6);  // too slow, beyond the row
    residual[{Kind::kCombine, 4}].emplace_back(4, -50e-6);  // a gap: clamped at 0
    residual[{Kind::kSampler, 3}].emplace_back(3, 1e-3);   // no row there: none made
  }
  residual[{Kind::kAttention, 5}].emplace_back(5, 1e-3);  // no row, one residual: nothing
  const double moved = table.refine(residual);
  EXPECT_NEAR(table.row(Kind::kExpert, 1)->second, 55e-6, 1e-12);
  // A stage row is a correction: below 0 where the kernel rows over-estimate the runs.
  EXPECT_NEAR(table.row(Kind::kExpert, 2)->second, -20e-6, 1e-12);
  EXPECT_EQ(table.row(Kind::kCombine, 4)->second, 0.0);
  EXPECT_EQ(table.row(Kind::kSampler, 3), nullptr);
  EXPECT_EQ(table.row(Kind::kAttention, 5), nullptr);
  EXPECT_NEAR(moved, 80e-6, 1e-12);
  // A replay that matches: nothing moves.
  Samples zero;
  for (int i = 0; i < 5; ++i) zero[{Kind::kExpert, 1}].emplace_back(1, 0.0);
  EXPECT_EQ(table.refine(zero), 0.0);
}

TEST(HostTimeTable, ItsRowsAreReadBackAsWritten) {
  Samples excess;
  for (int i = 0; i < 6; ++i) {
    excess[{Kind::kExpert, 3}].emplace_back(3, 25e-6);
    excess[{Kind::kExpert, host_time_bucket(100)}].emplace_back(100, 80e-6);
    excess[{Kind::kDispatch, 9}].emplace_back(12, 45e-6);
    excess[{Kind::kAttention, 1}].emplace_back(1, -40e-6);
  }
  const HostTimeTable table(excess);
  absl::StatusOr<MeasuredKernels> read = read_back(table, "host-time-table.csv");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_NEAR(read->host_seconds(Kind::kExpert, 3), 25e-6, 1e-12);
  EXPECT_NEAR(read->host_seconds(Kind::kExpert, 100), 80e-6, 1e-12);
  EXPECT_NEAR(read->host_seconds(Kind::kDispatch, 12), 45e-6, 1e-12);
  EXPECT_NEAR(read->host_seconds(Kind::kAttention, 1), -40e-6, 1e-12);
}

// The runs' spread is the root mean square deviation of log(measured / modeled) from each
// bucket's own mean (a bucket's offset is the rows' business, not spread), pooled over
// buckets with at least kMinSamples samples, without the largest fiftieth (a preemption).
TEST(HostTimeTable, RunSpreadIsTheDeviationFromEachBucketsMeanWithoutTheLargestFiftieth) {
  EXPECT_EQ(run_spread_of({}), 0.0);
  // Bucket 1 around +0.3, bucket 2 around -0.2, each ±0.1: σ = 0.1 whatever the offsets.
  std::map<int, std::vector<double>> ratios;
  for (int i = 0; i < 50; ++i) {
    ratios[1].push_back(0.3 + (i % 2 == 0 ? 0.1 : -0.1));
    ratios[2].push_back(-0.2 + (i % 2 == 0 ? 0.1 : -0.1));
  }
  EXPECT_NEAR(run_spread_of(ratios), 0.1, 1e-12);
  // Too few samples to be a bucket: left out.
  ratios[3] = {5.0, -5.0, 5.0, -5.0};
  EXPECT_NEAR(run_spread_of(ratios), 0.1, 1e-12);
  // One outlier in a hundred and one samples: the bucket's centre is its trimmed mean (the
  // outlier and one 0.2 left out), and the outlier's square and the next largest (101 / 50 = 2)
  // are dropped.
  ratios[1].push_back(3.0);
  const double centre = (24 * 0.2 + 25 * 0.4) / 49.0;
  const double lo = 0.4 - centre, hi = centre - 0.2;
  const double rms = std::sqrt((25 * lo * lo + 24 * hi * hi + 50 * 0.01) / 99.0);
  EXPECT_NEAR(run_spread_of(ratios), rms, 1e-9);
  // Values that are not finite are not samples.
  ratios[2].push_back(std::nan(""));
  EXPECT_NEAR(run_spread_of(ratios), rms, 1e-9);
  // Clamped to the parser's bound.
  std::map<int, std::vector<double>> wild{{1, {}}};
  for (int i = 0; i < 20; ++i) wild[1].push_back(i % 2 == 0 ? 3.0 : -3.0);
  EXPECT_EQ(run_spread_of(wild), MeasuredKernels::kMaxRunSpread);
}

}  // namespace
}  // namespace muflow::kernels::sim
