// The sparse barrier contributions (actors/contribution.hpp) and a delivery's row flows
// (actors/wiring_graph.hpp): group_rows's parts in ascending destination order whatever
// order rows arrive in, lookups, the dense view the planning rules use, and flows from a
// count matrix.
#include "actors/contribution.hpp"

#include <gtest/gtest.h>

#include <map>
#include <utility>
#include <vector>

#include "actors/wiring_graph.hpp"

namespace muflow::actors {
namespace {

using engine::dataflow::TokenBatch;
using engine::dataflow::TokenBatchPtr;
using engine::dataflow::TokenMeta;

// Row i of `dests` as a TokenMeta whose request id is dst * 100 + its index among the rows
// for dst, grouped with group_rows; counts the parts made.
ContributionPtr group(int64_t iteration, int32_t source, size_t num_dests,
                      const std::vector<int32_t>& dests, GroupScratch& scratch, int* made) {
  std::vector<int64_t> seen(num_dests, 0);
  std::vector<int64_t> ids;
  for (int32_t d : dests) ids.push_back(d * 100 + seen[static_cast<size_t>(d)]++);
  return group_rows(
      iteration, source, num_dests, static_cast<int64_t>(dests.size()),
      [&](int64_t i) { return dests[static_cast<size_t>(i)]; },
      [&](int32_t, int64_t) {
        ++*made;
        return std::make_shared<TokenBatch>();
      },
      [&](TokenBatch& part, int64_t i) {
        TokenMeta m;
        m.request_id = ids[static_cast<size_t>(i)];
        part.tokens.push_back(m);
      },
      scratch);
}

TEST(Contribution, GroupRowsSortsPartsByDestinationAndKeepsRowOrderWithinOne) {
  GroupScratch scratch;
  int made = 0;
  const ContributionPtr c =
      group(/*iteration=*/7, /*source=*/3, /*num_dests=*/6, {4, 1, 4, 0, 1, 4}, scratch, &made);
  EXPECT_EQ(made, 3);  // one part per destination used
  EXPECT_EQ(c->iteration, 7);
  EXPECT_EQ(c->source, 3);
  EXPECT_EQ(c->dests, (std::vector<int32_t>{0, 1, 4}));
  ASSERT_EQ(c->parts.size(), 3u);
  EXPECT_EQ(c->parts[2]->tokens.size(), 3u);
  EXPECT_EQ(c->parts[2]->tokens[0].request_id, 400);  // rows keep their order in a part
  EXPECT_EQ(c->parts[2]->tokens[2].request_id, 402);
  EXPECT_EQ(c->part(4), c->parts[2]);
  EXPECT_EQ(c->part(2), nullptr);
  EXPECT_EQ(c->part(9), nullptr);
  const std::vector<TokenBatchPtr> dense = c->dense_parts(6);
  ASSERT_EQ(dense.size(), 6u);
  EXPECT_EQ(dense[0], c->parts[0]);
  EXPECT_EQ(dense[1], c->parts[1]);
  EXPECT_EQ(dense[3], nullptr);
  EXPECT_EQ(dense[4], c->parts[2]);
}

TEST(Contribution, ARunOfNoRowsSendsNoParts) {
  GroupScratch scratch;
  int made = 0;
  const ContributionPtr c = group(1, 0, 4, {}, scratch, &made);
  EXPECT_EQ(made, 0);
  EXPECT_TRUE(c->dests.empty());
  EXPECT_TRUE(c->parts.empty());
  EXPECT_EQ(c->dense_parts(4), std::vector<TokenBatchPtr>(4));
}

// group_rows over one scratch for many runs of random rows and both sizes: each run's parts
// are those of a plain reference grouping (ascending destinations, rows in order, each part
// made once for its own destination and sized for its rows), and the scratch is clear after.
TEST(Contribution, GroupRowsMatchesAReferenceGroupingAndReusesItsScratch) {
  GroupScratch scratch;
  uint64_t state = 12345;
  const auto next = [&state](uint64_t mod) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % mod;
  };
  for (int call = 0; call < 20; ++call) {
    // The scratch serves both sizes, the small one first; every fifth run has no rows.
    const size_t num_dests = call % 2 == 0 ? 7 : 1024;
    const int64_t n = call % 5 == 0 ? 0 : static_cast<int64_t>(1 + next(39));
    std::vector<int32_t> dest(static_cast<size_t>(n));
    for (int32_t& d : dest) d = static_cast<int32_t>(next(num_dests));
    std::map<int32_t, std::vector<int64_t>> want;  // destination → row indices, in order
    for (int64_t i = 0; i < n; ++i) want[dest[static_cast<size_t>(i)]].push_back(i);
    std::vector<std::pair<int32_t, int64_t>> made;  // (destination, rows) per part, in order
    const ContributionPtr got = group_rows(
        call, 3, num_dests, n, [&](int64_t i) { return dest[static_cast<size_t>(i)]; },
        [&](int32_t dst, int64_t rows) {
          made.emplace_back(dst, rows);
          return std::make_shared<TokenBatch>();
        },
        [&](TokenBatch& part, int64_t i) {
          TokenMeta m;
          m.request_id = i;
          part.tokens.push_back(m);
        },
        scratch);
    EXPECT_EQ(got->iteration, call);
    EXPECT_EQ(got->source, 3);
    std::vector<int32_t> want_dests;
    for (const auto& [d, rows] : want) want_dests.push_back(d);
    ASSERT_EQ(got->dests, want_dests) << "call " << call;
    ASSERT_EQ(got->parts.size(), want.size());
    ASSERT_EQ(made.size(), got->parts.size()) << "one part made per destination used";
    for (size_t p = 0; p < got->parts.size(); ++p) {
      const std::vector<int64_t>& rows = want.at(got->dests[p]);
      EXPECT_EQ(made[p].first, got->dests[p]) << "part made for its own destination";
      EXPECT_EQ(made[p].second, got->parts[p]->num_tokens()) << "part sized for its rows";
      ASSERT_EQ(got->parts[p]->num_tokens(), static_cast<int64_t>(rows.size()));
      for (size_t r = 0; r < got->parts[p]->tokens.size(); ++r) {
        EXPECT_EQ(got->parts[p]->tokens[r].request_id, rows[r]);
      }
    }
    for (int32_t s : scratch.slot) ASSERT_EQ(s, -1) << "scratch left dirty after call " << call;
  }
}

TEST(ContributionDeathTest, GroupRowsAbortsOnADestinationOutsideTheCollective) {
  GroupScratch scratch;
  const auto run = [&](int32_t bad) {
    (void)group_rows(
        0, 0, 4, 2, [&](int64_t i) { return i == 0 ? 1 : bad; },
        [](int32_t, int64_t) { return std::make_shared<TokenBatch>(); },
        [](TokenBatch& part, int64_t) { part.tokens.emplace_back(); }, scratch);
  };
  EXPECT_DEATH(run(4), "destination outside the collective");
  EXPECT_DEATH(run(-1), "destination outside the collective");
}

TEST(RowFlows, FromACountMatrixSourceMajorWithoutZeros) {
  // rows_from[dest][source]
  const std::vector<RowFlow> flows = row_flows({{0, 2, 0}, {5, 0, 1}});
  ASSERT_EQ(flows.size(), 3u);
  EXPECT_EQ(flows[0].source, 0);
  EXPECT_EQ(flows[0].dest, 1);
  EXPECT_EQ(flows[0].rows, 5);
  EXPECT_EQ(flows[1].source, 1);
  EXPECT_EQ(flows[1].dest, 0);
  EXPECT_EQ(flows[1].rows, 2);
  EXPECT_EQ(flows[2].source, 2);
  EXPECT_EQ(flows[2].dest, 1);
  EXPECT_EQ(flows[2].rows, 1);
  EXPECT_TRUE(row_flows({}).empty());
}

}  // namespace
}  // namespace muflow::actors
