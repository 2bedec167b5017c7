// Dispatch for per-device expert stages (HarMoEny schedule, MoEShard all-gather) and
// MoEShard's reduce-scatter: row order, conservation, segment bookkeeping and bad input.
#include <gtest/gtest.h>

#include "engine/dataflow/expert_dispatch.hpp"

namespace muflow::engine {
namespace {

// A part of `n` rows from rank `src` for expert `e`; row i has request id src*100 + e*10 + i
// and activation row [id, -id].
dataflow::TokenBatchPtr part(int src, int e, int n) {
  auto b = std::make_shared<dataflow::TokenBatch>();
  b->act = std::make_shared<dataflow::Activations>(0, 2);
  for (int i = 0; i < n; ++i) {
    dataflow::TokenMeta m;
    m.request_id = src * 100 + e * 10 + i;
    b->tokens.push_back(m);
    b->act->data.push_back(static_cast<float>(m.request_id));
    b->act->data.push_back(-static_cast<float>(m.request_id));
    ++b->act->num_rows;
  }
  return b;
}

// 2 ranks, 3 experts: rank 0 sends 3 rows to e0 and 1 to e2; rank 1 sends 2 rows to e0.
dataflow::DispatchParts sample_parts() {
  return {{part(0, 0, 3), nullptr, part(0, 2, 1)}, {part(1, 0, 2), nullptr, nullptr}};
}

std::vector<int64_t> ids(const dataflow::TokenBatch& b) {
  std::vector<int64_t> out;
  for (const dataflow::TokenMeta& m : b.tokens) out.push_back(m.request_id);
  return out;
}

TEST(ExpertDispatch, CountsAreTheMetadataMatrix) {
  auto counts = dataflow::dispatch_counts(sample_parts());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(*counts, (std::vector<std::vector<int64_t>>{{3, 0, 1}, {2, 0, 0}}));
}

TEST(ExpertDispatch, ScheduleSplitsEachSourcesRowsInOrder) {
  // Homes: e0 → rank 0, e2 → rank 1. Move 2 of rank 0's e0 rows to rank 1.
  absl::StatusOr<planning::RebalanceSchedule> s =
      planning::harmoeny_initial_schedule({{3, 0, 1}, {2, 0, 0}}, {0, 1, 1});
  ASSERT_TRUE(s.ok());
  s->at(0, 0, 0) = 1;
  s->at(0, 0, 1) = 2;
  std::vector<std::vector<int64_t>> rows_from;
  auto out = dataflow::dispatch_by_schedule(sample_parts(), *s, 4, 9, 2, &rows_from);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  // Destination 0: e0 = rank 0's first row, then rank 1's two rows.
  EXPECT_EQ(ids(*(*out)[0]), (std::vector<int64_t>{0, 100, 101}));
  EXPECT_EQ((*out)[0]->segments, (std::vector<dataflow::ExpertSegment>{{0, 0, 3}}));
  // Destination 1: e0 = rank 0's rows 1 and 2, then e2 = rank 0's row.
  EXPECT_EQ(ids(*(*out)[1]), (std::vector<int64_t>{1, 2, 20}));
  EXPECT_EQ((*out)[1]->segments, (std::vector<dataflow::ExpertSegment>{{0, 0, 2}, {2, 2, 3}}));
  EXPECT_EQ((*out)[1]->act->data, (std::vector<float>{1, -1, 2, -2, 20, -20}));
  EXPECT_EQ((*out)[1]->layer.block, 4);
  EXPECT_EQ((*out)[1]->layer.index, 1);
  EXPECT_EQ((*out)[1]->iteration, 9);
  EXPECT_EQ(rows_from, (std::vector<std::vector<int64_t>>{{1, 2}, {3, 0}}));
}

TEST(ExpertDispatch, ScheduleThatDropsOrInventsTokensIsRejected) {
  absl::StatusOr<planning::RebalanceSchedule> s =
      planning::harmoeny_initial_schedule({{3, 0, 1}, {2, 0, 0}}, {0, 1, 1});
  ASSERT_TRUE(s.ok());
  s->at(0, 0, 0) = 2;  // one of rank 0's e0 rows would be dropped
  auto out = dataflow::dispatch_by_schedule(sample_parts(), *s, 0, 0, 2, nullptr);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("rank 0 expert 0"), std::string::npos);
  s->at(0, 0, 0) = 4;  // one invented
  EXPECT_FALSE(dataflow::dispatch_by_schedule(sample_parts(), *s, 0, 0, 2, nullptr).ok());
  absl::StatusOr<planning::RebalanceSchedule> wrong =
      planning::harmoeny_initial_schedule({{3, 0}, {2, 0}}, {0, 1});
  ASSERT_TRUE(wrong.ok());
  EXPECT_FALSE(dataflow::dispatch_by_schedule(sample_parts(), *wrong, 0, 0, 2, nullptr).ok());
}

TEST(ExpertDispatch, AllGatherGivesEveryDestinationEveryRowGroupedByExpert) {
  std::vector<std::vector<int64_t>> rows_from;
  auto out = dataflow::dispatch_all_gather(sample_parts(), 3, 1, 5, 2, &rows_from);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(ids(*(*out)[d]), (std::vector<int64_t>{0, 1, 2, 100, 101, 20}));
    EXPECT_EQ((*out)[d]->segments, (std::vector<dataflow::ExpertSegment>{{0, 0, 5}, {2, 5, 6}}));
    EXPECT_EQ((*out)[d]->layer.index, d);
  }
  EXPECT_EQ(rows_from, (std::vector<std::vector<int64_t>>(3, {4, 2})));
  EXPECT_FALSE(dataflow::dispatch_all_gather(sample_parts(), 0, 1, 5, 2, nullptr).ok());
  EXPECT_FALSE(dataflow::dispatch_all_gather(sample_parts(), 2, 1, 5, 3, nullptr).ok()) << "width";
}

TEST(ExpertDispatch, ReduceSumsInShardOrderAndChecksTokens) {
  auto a = part(0, 0, 2), b = part(0, 0, 2), c = part(0, 0, 2);
  b->act->data = {1e8f, 0, 1, 0};
  c->act->data = {-1e8f, 0, 1, 0};
  auto sum = dataflow::reduce_partials({a, nullptr, b, c});
  ASSERT_TRUE(sum.ok()) << sum.status();
  // Row 0: (0 + 1e8) − 1e8 = 0; row 1: (1 + 1) + 1 = 3 and −1 + 0 + 0 = −1.
  EXPECT_EQ((*sum)->act->data, (std::vector<float>{0, 0, 3, -1}));
  EXPECT_EQ(ids(**sum), (std::vector<int64_t>{0, 1}));
  auto wrong = part(1, 0, 2);
  EXPECT_FALSE(dataflow::reduce_partials({a, wrong}).ok());
  EXPECT_FALSE(dataflow::reduce_partials({a, part(0, 0, 1)}).ok());
  auto none = dataflow::reduce_partials({nullptr, nullptr});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
}

TEST(ExpertDispatch, ReduceOrderIsObservable) {
  // Float addition is not associative: the shard order is part of the contract.
  auto a = part(0, 0, 1), b = part(0, 0, 1), c = part(0, 0, 1);
  a->act->data = {1e8f, 0};
  b->act->data = {1.f, 0};
  c->act->data = {-1e8f, 0};
  auto abc = dataflow::reduce_partials({a, b, c});
  auto acb = dataflow::reduce_partials({a, c, b});
  ASSERT_TRUE(abc.ok() && acb.ok());
  EXPECT_EQ((*abc)->act->data[0], 0.f);  // (1e8 + 1) rounds to 1e8
  EXPECT_EQ((*acb)->act->data[0], 1.f);
}

}  // namespace
}  // namespace muflow::engine
