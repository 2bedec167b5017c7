// Routing CSVs (`muflow run --record-routing`, read back by the sim's `recorded` router and the
// ExFlow planner): a round trip, the recorder's key order and last-choice rule, and rows that
// cannot be router outputs are refused with the file and line (#15: NaN / inf / negative
// weights and repeated experts were accepted).
#include "engine/routing/routing_record.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "scratch_path.hpp"

namespace muflow::engine {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string write_record_csv(const std::string& name, const std::string& body) {
  const fs::path p = muflow::testing::scratch_path("routing-" + name + ".csv");
  std::ofstream(p) << "request_id,position,block,experts,weights\n" << body;
  return p.string();
}

TEST(RoutingCsv, RoundTripThroughTheRecorder) {
  routing::RoutingRecorder rec;
  const int32_t ids[2] = {3, 1};
  const float w[2] = {0.75f, 0.25f};
  rec.add(7, 2, 0, ids, w, 2);
  const std::string path = muflow::testing::scratch_path("routing-rt.csv").string();
  ASSERT_TRUE(rec.write_csv(path).ok());
  absl::StatusOr<routing::RoutingTable> t = routing::read_routing_csv(path);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 1u);
  const routing::RoutingChoice& c = t->begin()->second;
  EXPECT_EQ(c.experts, (std::vector<int32_t>{3, 1}));
  EXPECT_EQ(c.weights, (std::vector<float>{0.75f, 0.25f}));
  fs::remove(path);
}

TEST(RoutingCsv, TheRecorderSortsByKeyAndKeepsTheLastChoiceOfAKey) {
  routing::RoutingRecorder rec;
  const int32_t a[2] = {0, 5}, b[2] = {6, 2}, c[2] = {4, 1};
  const float w[2] = {0.5f, 0.5f}, v[2] = {0.875f, 0.125f};
  rec.add(3, 1, 1, a, w, 2);  // added out of key order, as ranks and blocks interleave
  rec.add(3, 1, 0, b, w, 2);
  rec.add(1, 9, 2, c, v, 2);
  rec.add(3, 1, 1, c, v, 2);  // the same token again (recomputed after a recovery): this counts
  const routing::RoutingTable t = rec.table();
  ASSERT_EQ(t.size(), 3u);
  auto it = t.begin();
  EXPECT_EQ(it->first, std::make_tuple(int64_t{1}, int64_t{9}, int32_t{2}));
  EXPECT_EQ(it->second.experts, (std::vector<int32_t>{4, 1}));
  ++it;
  EXPECT_EQ(it->first, std::make_tuple(int64_t{3}, int64_t{1}, int32_t{0}));
  EXPECT_EQ(it->second.experts, (std::vector<int32_t>{6, 2}));
  ++it;
  EXPECT_EQ(it->first, std::make_tuple(int64_t{3}, int64_t{1}, int32_t{1}));
  EXPECT_EQ(it->second.experts, (std::vector<int32_t>{4, 1}));
  EXPECT_EQ(it->second.weights, (std::vector<float>{0.875f, 0.125f}));

  const std::string path = muflow::testing::scratch_path("routing-order.csv").string();
  ASSERT_TRUE(rec.write_csv(path).ok());
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text,
            "request_id,position,block,experts,weights\n"
            "1,9,2,4 1,0.875 0.125\n"
            "3,1,0,6 2,0.5 0.5\n"
            "3,1,1,4 1,0.875 0.125\n");
  absl::StatusOr<routing::RoutingTable> back = routing::read_routing_csv(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->size(), 3u);
  fs::remove(path);
}

TEST(RoutingCsv, ByteOrderMarkAndCrlfHeader) {
  const fs::path p = muflow::testing::scratch_path("routing-bom.csv");
  std::ofstream(p) << "\xEF\xBB\xBFrequest_id,position,block,experts,weights\r\n0,0,0,1 2,0.5 0.5\n";
  absl::StatusOr<routing::RoutingTable> t = routing::read_routing_csv(p.string());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->size(), 1u);
  fs::remove(p);
}

TEST(RoutingCsv, RowsThatCannotBeRouterOutputsAreRefused) {
  const struct {
    const char* name;
    const char* row;
    const char* expect;
  } cases[] = {
      {"nan", "0,0,0,1 2,nan 0.5\n", ":2: weights must be finite and >= 0"},
      {"inf", "0,0,0,1 2,inf 0.5\n", ":2: weights must be finite and >= 0"},
      {"neg", "0,0,0,1 2,0.5 -0.5\n", ":2: weights must be finite and >= 0"},
      {"dup", "0,0,0,1 1,0.5 0.5\n", ":2: expert 1 appears twice in one row"},
      {"negid", "0,0,0,-1 2,0.5 0.5\n", ":2: expert ids must be >= 0"},
  };
  for (const auto& c : cases) {
    const std::string path = write_record_csv(c.name, c.row);
    absl::StatusOr<routing::RoutingTable> t = routing::read_routing_csv(path);
    ASSERT_FALSE(t.ok()) << c.name;
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(path + c.expect)) << c.name;
    fs::remove(path);
  }
}

}  // namespace
}  // namespace muflow::engine
