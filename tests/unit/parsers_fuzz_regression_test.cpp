// Inputs found by the fuzz targets of tests/fuzz/ (or while writing them) that crashed a
// parser, each with the error the parser now returns. See tests/fuzz/README.md.
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/routing/router_replay.hpp"
#include "scratch_path.hpp"

namespace muflow::engine {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string write_file(const std::string& name, const std::string& text) {
  const fs::path dir = muflow::testing::scratch_path("parsers_fuzz_regression_test");
  fs::create_directories(dir);
  const fs::path path = dir / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

constexpr const char* kPerRankHeader =
    "model,num_experts,world_size,layer,iteration,src_rank,tokens_sent,expert_counts\n";

// fuzz_per_rank_routing_csv: indices from the file sized the counts grid before any check, so
// one row with a huge layer, iteration or world_size allocated (or overflowed to) anything.
TEST(PerRankRoutingCsvFuzzRegression, HugeIndicesAreMissingRowsNotAllocations) {
  const std::string cases[] = {
      "m,2,1,9223372036854775807,0,0,2,1 1\n",  // layer + 1 overflowed
      "m,2,1,0,4611686018427387904,0,2,1 1\n",  // iteration: a 2^62-cell grid
      "m,2,1000000000000,0,0,0,2,1 1\n",        // world_size: 10^12 ranks
  };
  for (const std::string& row : cases) {
    const std::string path = write_file("huge.csv", kPerRankHeader + row);
    absl::StatusOr<routing::PerRankRoutingCounts> c = routing::load_per_rank_routing_csv(path, 2);
    ASSERT_FALSE(c.ok()) << row;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
    EXPECT_THAT(c.status().message(), HasSubstr("no row for rank ")) << c.status();
  }
}

// expert_counts whose sum passes 2^63 overflowed a signed int64 (UBSan).
TEST(PerRankRoutingCsvFuzzRegression, CountsThatOverflowTheSumAreRejected) {
  const std::string path = write_file(
      "overflow.csv", std::string(kPerRankHeader) +
                          "m,2,1,0,0,0,1,9223372036854775807 9223372036854775807\n");
  absl::StatusOr<routing::PerRankRoutingCounts> c = routing::load_per_rank_routing_csv(path, 2);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr("overflows")) << c.status();
}

// fuzz_per_rank_routing_csv: a header naming a column twice mapped fewer names than it has
// fields, so rows were checked against the smaller count and a field index read past the row
// (ASan heap-buffer-overflow).
TEST(PerRankRoutingCsvFuzzRegression, DuplicateHeaderColumnIsRejected) {
  const std::string path = write_file(
      "dup.csv", "model,model,num_experts,world_size,layer,iteration,src_rank,tokens_sent,"
                 "expert_counts\nm,2,1,0,0,0,2,1 1\n");
  absl::StatusOr<routing::PerRankRoutingCounts> c = routing::load_per_rank_routing_csv(path, 2);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr("duplicate column 'model'")) << c.status();
}

// A complete grid still loads (the check counts rows, it does not reject valid files).
TEST(PerRankRoutingCsvFuzzRegression, CompleteGridLoads) {
  const std::string path = write_file(
      "ok.csv", std::string(kPerRankHeader) +
                    "m,2,2,0,0,0,2,1 1\nm,2,2,0,0,1,3,0 3\nm,2,2,1,0,0,1,1 0\nm,2,2,1,0,1,2,2 0\n");
  absl::StatusOr<routing::PerRankRoutingCounts> c = routing::load_per_rank_routing_csv(path, 2);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_ranks, 2);
  EXPECT_EQ(c->num_layers, 2);
  EXPECT_EQ(c->num_iterations, 1);
}

}  // namespace
}  // namespace muflow::engine
