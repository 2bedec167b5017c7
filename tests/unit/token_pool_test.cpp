// The receptor token pool (AsyncMoE §3.2, engine/dataflow/token_pool.hpp): merges against values
// computed by hand, bitwise independence of arrival order (values chosen so float summation
// order changes the result), completion tracking, dropped tokens, duplicates and bad widths.

#include "engine/dataflow/token_pool.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace muflow::engine {
namespace {

using ::testing::HasSubstr;

/// One row of a batch: its metadata and its values.
struct Row {
  int64_t request_id;
  int64_t position;
  int16_t topk_rank;
  float topk_weight;
  std::vector<float> values;
};

dataflow::TokenBatch make_batch(dataflow::Payload payload, int64_t iteration, int64_t width,
                                const std::vector<Row>& rows) {
  dataflow::TokenBatch b;
  b.payload = payload;
  b.iteration = iteration;
  b.act = std::make_shared<dataflow::Activations>(static_cast<int64_t>(rows.size()), width);
  for (size_t i = 0; i < rows.size(); ++i) {
    dataflow::TokenMeta m;
    m.request_id = rows[i].request_id;
    m.position = rows[i].position;
    m.topk_rank = rows[i].topk_rank;
    m.topk_weight = rows[i].topk_weight;
    b.tokens.push_back(m);
    EXPECT_EQ(static_cast<int64_t>(rows[i].values.size()), width) << "test helper misuse";
    std::copy(rows[i].values.begin(), rows[i].values.end(), b.act->row(static_cast<int64_t>(i)));
  }
  return b;
}

dataflow::TokenBatch residual(int64_t iteration, int64_t width, const std::vector<Row>& rows) {
  return make_batch(dataflow::Payload::kResidual, iteration, width, rows);
}
dataflow::TokenBatch outputs(int64_t iteration, int64_t width, const std::vector<Row>& rows) {
  return make_batch(dataflow::Payload::kExpertOutputs, iteration, width, rows);
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// hidden 2, top-2, one message. Values are exact in binary so the expected values are exact:
//   h = r + (0.5·y0 + 0.25·y1)
TEST(TokenPool, MergeEqualsHandComputedWeightedSum) {
  dataflow::TokenPool pool(/*hidden=*/2, /*num_topk=*/2, /*expected_expert_messages=*/1);
  ASSERT_TRUE(pool.add_residual(residual(0, 2, {{7, 3, 0, 0.f, {1.f, -2.f}}})).ok());
  ASSERT_TRUE(pool.add_expert_outputs(
                      outputs(0, 2, {{7, 3, 0, 0.5f, {4.f, 8.f}}, {7, 3, 1, 0.25f, {16.f, -4.f}}}))
                  .ok());
  ASSERT_EQ(pool.complete_iteration(), 0);
  absl::StatusOr<dataflow::MergedTokens> merged = pool.take(0);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->iteration, 0);
  ASSERT_EQ(merged->tokens.size(), 1u);
  EXPECT_EQ(merged->tokens[0].request_id, 7);
  EXPECT_EQ(merged->tokens[0].position, 3);
  // d0: 1 + (0.5·4 + 0.25·16) = 1 + 6 = 7;  d1: -2 + (0.5·8 + 0.25·-4) = -2 + 3 = 1
  EXPECT_EQ(merged->h, (std::vector<float>{7.f, 1.f}));
  // A taken iteration is gone.
  EXPECT_EQ(pool.complete_iteration(), -1);
  EXPECT_EQ(pool.num_tokens(0), 0);
  EXPECT_EQ(pool.take(0).status().code(), absl::StatusCode::kFailedPrecondition);
}

// Rows of width 2·hidden carry [h_mid | shared]; shared is added after the expert sum:
//   h = r + ((w0·y0 + w1·y1) + s)
TEST(TokenPool, SharedExpertPartOfWideResidualRows) {
  dataflow::TokenPool pool(2, 2, 1);
  ASSERT_TRUE(pool.add_residual(residual(4, 4, {{1, 0, 0, 0.f, {10.f, 20.f, 0.5f, -8.f}}})).ok());
  ASSERT_TRUE(pool.add_expert_outputs(
                      outputs(4, 2, {{1, 0, 1, 0.5f, {2.f, 2.f}}, {1, 0, 0, 1.0f, {1.f, 3.f}}}))
                  .ok());
  absl::StatusOr<dataflow::MergedTokens> merged = pool.take(4);
  ASSERT_TRUE(merged.ok()) << merged.status();
  // d0: 10 + ((1 + 1) + 0.5) = 12.5;  d1: 20 + ((3 + 1) - 8) = 16
  EXPECT_EQ(merged->h, (std::vector<float>{12.5f, 16.f}));
}

// Summation order matters for these values in float:
//   rank order (1e8 + 1) + -1e8 = 0     (1e8 + 1 rounds to 1e8; spacing there is 8)
//   arrival order rank 2, 0, 1: (-1e8 + 1e8) + 1 = 1
// The pool must use rank order whatever the arrival order, so every dim merges to r + 0.
constexpr int64_t kHidden = 3;
const std::vector<float> kY0 = {1e8f, 1.f, -1e8f};
const std::vector<float> kY1 = {1.f, -1e8f, 1e8f};
const std::vector<float> kY2 = {-1e8f, 1e8f, 1.f};
const std::vector<float> kResidualA = {5.f, 6.f, 7.f};
const std::vector<float> kResidualB = {-1.f, 0.f, 2.f};

std::vector<float> merge_in_order() {
  dataflow::TokenPool pool(kHidden, 3, 1);
  EXPECT_TRUE(pool.add_residual(residual(0, kHidden,
                                         {{0, 0, 0, 0.f, kResidualA}, {0, 1, 0, 0.f, kResidualB}}))
                  .ok());
  EXPECT_TRUE(pool.add_expert_outputs(outputs(0, kHidden,
                                              {{0, 0, 0, 1.f, kY0},
                                               {0, 0, 1, 1.f, kY1},
                                               {0, 0, 2, 1.f, kY2},
                                               {0, 1, 0, 1.f, kY1},
                                               {0, 1, 1, 1.f, kY2},
                                               {0, 1, 2, 1.f, kY0}}))
                  .ok());
  absl::StatusOr<dataflow::MergedTokens> merged = pool.take(0);
  EXPECT_TRUE(merged.ok()) << merged.status();
  return merged.ok() ? merged->h : std::vector<float>{};
}

TEST(TokenPool, InOrderMergeUsesTopkRankOrder) {
  const std::vector<float> h = merge_in_order();
  // Token (0,0) ranks y0,y1,y2: per dim (1e8+1)-1e8=0, (1-1e8)+1e8=0, (-1e8+1e8)+1=1.
  // Token (0,1) ranks y1,y2,y0: (1-1e8)+1e8=0, (-1e8+1e8)+1=1, (1e8+1)-1e8=0.
  EXPECT_EQ(h, (std::vector<float>{5.f, 6.f, 8.f, -1.f, 1.f, 2.f}));
}

TEST(TokenPool, OutOfOrderArrivalIsBitwiseIdentical) {
  const std::vector<float> expected = merge_in_order();
  ASSERT_FALSE(expected.empty());
  // Expert outputs before the residual, higher ranks first, spread over three messages,
  // token 1's rows before token 0's.
  dataflow::TokenPool pool(kHidden, 3, /*expected_expert_messages=*/3);
  ASSERT_TRUE(
      pool.add_expert_outputs(outputs(0, kHidden, {{0, 1, 2, 1.f, kY0}, {0, 0, 2, 1.f, kY2}}))
          .ok());
  EXPECT_EQ(pool.complete_iteration(), -1);
  ASSERT_TRUE(
      pool.add_expert_outputs(outputs(0, kHidden, {{0, 1, 1, 1.f, kY2}, {0, 0, 1, 1.f, kY1}}))
          .ok());
  EXPECT_EQ(pool.complete_iteration(), -1);
  ASSERT_TRUE(
      pool.add_expert_outputs(outputs(0, kHidden, {{0, 0, 0, 1.f, kY0}, {0, 1, 0, 1.f, kY1}}))
          .ok());
  EXPECT_EQ(pool.complete_iteration(), -1) << "complete before the residual arrived";
  ASSERT_TRUE(pool.add_residual(residual(0, kHidden,
                                         {{0, 1, 0, 0.f, kResidualB}, {0, 0, 0, 0.f, kResidualA}}))
                  .ok());
  ASSERT_EQ(pool.complete_iteration(), 0);
  absl::StatusOr<dataflow::MergedTokens> merged = pool.take(0);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_TRUE(bitwise_equal(merged->h, expected));
  // An arrival-order sum (ranks 2, 1, 0 for token (0,0)) would give 7 for dims 1 and 2.
  EXPECT_EQ(merged->h[1], 6.f);
  EXPECT_EQ(merged->h[2], 8.f);
}

TEST(TokenPool, CompleteIterationNeedsResidualAndAllMessages) {
  dataflow::TokenPool pool(1, 1, /*expected_expert_messages=*/2);
  EXPECT_EQ(pool.complete_iteration(), -1);
  ASSERT_TRUE(
      pool.add_residual(residual(3, 1, {{0, 0, 0, 0.f, {1.f}}, {1, 0, 0, 0.f, {2.f}}})).ok());
  EXPECT_EQ(pool.complete_iteration(), -1);
  EXPECT_EQ(pool.take(3).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(pool.add_expert_outputs(outputs(3, 1, {{1, 0, 0, 1.f, {10.f}}})).ok());
  EXPECT_EQ(pool.complete_iteration(), -1);
  EXPECT_EQ(pool.num_tokens(3), 2);
  ASSERT_TRUE(pool.add_expert_outputs(outputs(3, 1, {{0, 0, 0, 1.f, {20.f}}})).ok());
  EXPECT_EQ(pool.complete_iteration(), 3);
  absl::StatusOr<dataflow::MergedTokens> merged = pool.take(3);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->h, (std::vector<float>{21.f, 12.f}));
}

// `exflow`: residuals of one iteration come from every rank (tokens continue where their top-1
// expert ran). The iteration completes only with all of them, in any order; an extra batch or
// a token repeated across batches is rejected without changing the pool.
TEST(TokenPool, ResidualsFromSeveralRanks) {
  dataflow::TokenPool pool(1, 1, /*expected_expert_messages=*/1, /*expected_residual_messages=*/3);
  ASSERT_TRUE(pool.add_residual(residual(0, 1, {{4, 9, 0, 0.f, {1.f}}})).ok());
  ASSERT_TRUE(pool.add_expert_outputs(
                      outputs(0, 1, {{4, 9, 0, 1.f, {10.f}}, {2, 5, 0, 1.f, {20.f}}}))
                  .ok());
  ASSERT_TRUE(pool.add_residual(residual(0, 1, {})).ok());  // a rank that sent us nothing
  EXPECT_EQ(pool.complete_iteration(), -1);
  const absl::Status repeated = pool.add_residual(residual(0, 1, {{4, 9, 0, 0.f, {5.f}}}));
  EXPECT_EQ(repeated.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(repeated.message().find("request 4 position 9 added twice"), std::string::npos)
      << repeated;
  EXPECT_EQ(pool.complete_iteration(), -1);
  ASSERT_TRUE(pool.add_residual(residual(0, 1, {{2, 5, 0, 0.f, {2.f}}})).ok());
  EXPECT_EQ(pool.complete_iteration(), 0);
  EXPECT_EQ(pool.add_residual(residual(0, 1, {})).code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<dataflow::MergedTokens> merged = pool.take(0);
  ASSERT_TRUE(merged.ok()) << merged.status();
  ASSERT_EQ(merged->tokens.size(), 2u);
  EXPECT_EQ(merged->tokens[0].request_id, 2);  // sorted by (request, position)
  EXPECT_EQ(merged->h, (std::vector<float>{22.f, 11.f}));
}

TEST(TokenPool, EarliestCompleteIterationFirst) {
  dataflow::TokenPool pool(1, 1, 1);
  // Iteration 5 completes first in time, then 2; 1 stays incomplete (no residual).
  ASSERT_TRUE(pool.add_expert_outputs(outputs(1, 1, {{9, 0, 0, 1.f, {1.f}}})).ok());
  ASSERT_TRUE(pool.add_residual(residual(5, 1, {{0, 5, 0, 0.f, {1.f}}})).ok());
  ASSERT_TRUE(pool.add_expert_outputs(outputs(5, 1, {{0, 5, 0, 1.f, {1.f}}})).ok());
  EXPECT_EQ(pool.complete_iteration(), 5);
  ASSERT_TRUE(pool.add_residual(residual(2, 1, {{0, 2, 0, 0.f, {1.f}}})).ok());
  ASSERT_TRUE(pool.add_expert_outputs(outputs(2, 1, {{0, 2, 0, 1.f, {1.f}}})).ok());
  EXPECT_EQ(pool.complete_iteration(), 2);
  ASSERT_TRUE(pool.take(2).ok());
  EXPECT_EQ(pool.complete_iteration(), 5);
  ASSERT_TRUE(pool.take(5).ok());
  EXPECT_EQ(pool.complete_iteration(), -1);
  EXPECT_EQ(pool.num_tokens(1), 1);
}

TEST(TokenPool, TokenMissingATopkOutputIsReportedNotDropped) {
  dataflow::TokenPool pool(1, 2, 1);
  ASSERT_TRUE(
      pool.add_residual(residual(0, 1, {{3, 0, 0, 0.f, {1.f}}, {42, 17, 0, 0.f, {1.f}}})).ok());
  // Request 42 position 17 gets only rank 0.
  ASSERT_TRUE(
      pool
          .add_expert_outputs(outputs(
              0, 1, {{3, 0, 0, 0.5f, {1.f}}, {3, 0, 1, 0.5f, {1.f}}, {42, 17, 0, 1.f, {1.f}}}))
          .ok());
  ASSERT_EQ(pool.complete_iteration(), 0);
  absl::StatusOr<dataflow::MergedTokens> merged = pool.take(0);
  ASSERT_FALSE(merged.ok());
  EXPECT_EQ(merged.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(merged.status().message(), HasSubstr("request 42"));
  EXPECT_THAT(merged.status().message(), HasSubstr("dropped"));
}

TEST(TokenPool, ExpertOutputForTokenWithoutResidualIsReported) {
  dataflow::TokenPool pool(1, 1, 1);
  ASSERT_TRUE(pool.add_residual(residual(0, 1, {{1, 0, 0, 0.f, {1.f}}})).ok());
  ASSERT_TRUE(
      pool.add_expert_outputs(outputs(0, 1, {{1, 0, 0, 1.f, {1.f}}, {8, 4, 0, 1.f, {1.f}}})).ok());
  absl::StatusOr<dataflow::MergedTokens> merged = pool.take(0);
  ASSERT_FALSE(merged.ok());
  EXPECT_EQ(merged.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(merged.status().message(), HasSubstr("request 8"));
  EXPECT_THAT(merged.status().message(), HasSubstr("dropped"));
}

TEST(TokenPool, DuplicatesRejected) {
  dataflow::TokenPool pool(1, 2, 2);
  ASSERT_TRUE(pool.add_residual(residual(0, 1, {{1, 0, 0, 0.f, {1.f}}})).ok());
  absl::Status second = pool.add_residual(residual(0, 1, {{2, 0, 0, 0.f, {1.f}}}));
  EXPECT_EQ(second.code(), absl::StatusCode::kInvalidArgument);
  // The same token twice inside one residual batch.
  dataflow::TokenPool pool2(1, 2, 1);
  absl::Status twice =
      pool2.add_residual(residual(0, 1, {{1, 0, 0, 0.f, {1.f}}, {1, 0, 0, 0.f, {2.f}}}));
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  // ... or apart, in a batch out of (request, position) order (the check's slow path); the
  // same tokens in ascending order, once each, are taken (its one-pass path).
  dataflow::TokenPool pool4(1, 2, 1);
  const absl::Status apart = pool4.add_residual(
      residual(0, 1, {{2, 0, 0, 0.f, {1.f}}, {1, 0, 0, 0.f, {2.f}}, {2, 0, 0, 0.f, {3.f}}}));
  EXPECT_EQ(apart.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(apart.message(), HasSubstr("request 2 position 0 added twice"));
  EXPECT_EQ(pool4.num_tokens(0), 0);
  ASSERT_TRUE(
      pool4.add_residual(residual(0, 1, {{1, 0, 0, 0.f, {2.f}}, {2, 0, 0, 0.f, {1.f}}})).ok());
  EXPECT_EQ(pool4.num_tokens(0), 2);
  // The same (token, rank) twice, in one message or across messages.
  ASSERT_TRUE(pool.add_expert_outputs(outputs(0, 1, {{1, 0, 1, 0.5f, {1.f}}})).ok());
  absl::Status rank_twice = pool.add_expert_outputs(outputs(0, 1, {{1, 0, 1, 0.5f, {3.f}}}));
  EXPECT_EQ(rank_twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(rank_twice.message(), HasSubstr("twice"));
  dataflow::TokenPool pool3(1, 2, 1);
  absl::Status in_one =
      pool3.add_expert_outputs(outputs(0, 1, {{1, 0, 0, 0.5f, {1.f}}, {1, 0, 0, 0.5f, {1.f}}}));
  EXPECT_EQ(in_one.code(), absl::StatusCode::kInvalidArgument);
}

// A batch rejected by its last row (a top-k rank it brings twice) leaves nothing behind: no
// entry or iteration it created, no mark on the entries it shared with the pool; the corrected
// batch then merges to the exact weighted sums.
TEST(TokenPool, RejectedExpertBatchLeavesThePoolAsItWas) {
  dataflow::TokenPool pool(/*hidden=*/1, /*num_topk=*/2, /*expected_expert_messages=*/1);
  ASSERT_TRUE(pool.add_residual(residual(3, 1, {{1, 0, 0, 0.f, {1.f}}})).ok());
  absl::Status dup = pool.add_expert_outputs(
      outputs(3, 1, {{1, 0, 0, 0.5f, {2.f}}, {2, 0, 0, 0.5f, {4.f}}, {1, 0, 0, 0.5f, {2.f}}}));
  EXPECT_THAT(dup.message(), HasSubstr("request 1 position 0 got top-k rank 0 twice"));
  EXPECT_EQ(pool.num_tokens(3), 1) << "the entry of request 2 was left behind";
  absl::Status other =
      pool.add_expert_outputs(outputs(4, 1, {{5, 0, 0, 1.f, {1.f}}, {5, 0, 0, 1.f, {1.f}}}));
  EXPECT_FALSE(other.ok());
  EXPECT_EQ(pool.num_tokens(4), 0) << "iteration 4 was left behind";
  ASSERT_TRUE(pool.add_residual(residual(3, 1, {{2, 0, 0, 0.f, {8.f}}})).code() ==
              absl::StatusCode::kInvalidArgument);  // the iteration's residual came already
  ASSERT_TRUE(
      pool.add_expert_outputs(outputs(3, 1, {{1, 0, 0, 0.5f, {2.f}}, {1, 0, 1, 0.25f, {4.f}}}))
          .ok());
  absl::StatusOr<dataflow::MergedTokens> merged = pool.take(3);
  ASSERT_TRUE(merged.ok()) << merged.status();
  ASSERT_EQ(merged->tokens.size(), 1u);
  EXPECT_EQ(merged->h, std::vector<float>({1.f + (0.5f * 2.f + 0.25f * 4.f)}));
}

TEST(TokenPool, RankOutOfRangeRejected) {
  dataflow::TokenPool pool(1, 2, 1);
  EXPECT_EQ(pool.add_expert_outputs(outputs(0, 1, {{1, 0, 2, 0.5f, {1.f}}})).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.add_expert_outputs(outputs(0, 1, {{1, 0, -1, 0.5f, {1.f}}})).code(),
            absl::StatusCode::kInvalidArgument);
}

// Regression (was a bug): add_expert_outputs counts a message toward expected_expert_messages before
// validating its rows, so a rejected message makes the iteration look complete. The pool's
// contract is that complete_iteration() means "all expected expert messages have arrived";
// a rejected message has not been accepted.
TEST(TokenPool, RejectedExpertMessageDoesNotCountTowardCompletion) {
  dataflow::TokenPool pool(1, 1, 1);
  ASSERT_TRUE(pool.add_residual(residual(0, 1, {{1, 0, 0, 0.f, {1.f}}})).ok());
  ASSERT_FALSE(pool.add_expert_outputs(outputs(0, 1, {{1, 0, 5, 1.f, {1.f}}})).ok());
  EXPECT_EQ(pool.complete_iteration(), -1)
      << "a rejected expert message was counted as one of the expected messages";
}

// Regression (was a bug): add_residual marks the iteration's residual as arrived and stores the rows
// before the duplicate check of a later row fails, so after a rejected batch the corrected
// batch is refused as a "second residual batch" and the iteration can never merge.
TEST(TokenPool, RejectedResidualBatchCanBeResent) {
  dataflow::TokenPool pool(1, 1, 1);
  ASSERT_FALSE(
      pool.add_residual(residual(0, 1, {{1, 0, 0, 0.f, {1.f}}, {1, 0, 0, 0.f, {2.f}}})).ok());
  EXPECT_EQ(pool.complete_iteration(), -1);
  EXPECT_TRUE(
      pool.add_residual(residual(0, 1, {{1, 0, 0, 0.f, {1.f}}, {1, 1, 0, 0.f, {2.f}}})).ok())
      << "a rejected residual batch left the iteration marked as having its residual";
}

TEST(TokenPool, BadWidthsRejected) {
  dataflow::TokenPool pool(4, 1, 1);
  absl::Status r = pool.add_residual(residual(0, 3, {{1, 0, 0, 0.f, {1.f, 2.f, 3.f}}}));
  EXPECT_EQ(r.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.message(), HasSubstr("width 3"));
  absl::Status r16 = pool.add_residual(residual(0, 16, {{1, 0, 0, 0.f, std::vector<float>(16)}}));
  EXPECT_EQ(r16.code(), absl::StatusCode::kInvalidArgument);
  // Expert outputs must be exactly hidden wide (2·hidden is only for residual rows).
  EXPECT_EQ(pool.add_expert_outputs(outputs(0, 8, {{1, 0, 0, 1.f, std::vector<float>(8)}})).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.add_expert_outputs(outputs(0, 2, {{1, 0, 0, 1.f, {1.f, 2.f}}})).code(),
            absl::StatusCode::kInvalidArgument);
  // Rows with no activations at all.
  dataflow::TokenBatch no_act;
  no_act.iteration = 0;
  no_act.tokens.push_back(dataflow::TokenMeta{});
  EXPECT_EQ(pool.add_residual(no_act).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.add_expert_outputs(no_act).code(), absl::StatusCode::kInvalidArgument);
  // Rejected residuals did not mark the residual as arrived: a good one is still accepted.
  EXPECT_TRUE(pool.add_residual(residual(0, 4, {{1, 0, 0, 0.f, {1.f, 2.f, 3.f, 4.f}}})).ok());
}

TEST(TokenPool, EmptyIterationCompletesAndYieldsNothing) {
  dataflow::TokenPool pool(8, 2, 2);
  dataflow::TokenBatch empty_residual;
  empty_residual.payload = dataflow::Payload::kResidual;
  empty_residual.iteration = 6;
  ASSERT_TRUE(pool.add_residual(empty_residual).ok());
  EXPECT_EQ(pool.complete_iteration(), -1);
  dataflow::TokenBatch empty_outputs;
  empty_outputs.payload = dataflow::Payload::kExpertOutputs;
  empty_outputs.iteration = 6;
  ASSERT_TRUE(pool.add_expert_outputs(empty_outputs).ok());
  ASSERT_TRUE(pool.add_expert_outputs(empty_outputs).ok());
  EXPECT_EQ(pool.complete_iteration(), 6);
  EXPECT_EQ(pool.num_tokens(6), 0);
  absl::StatusOr<dataflow::MergedTokens> merged = pool.take(6);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->iteration, 6);
  EXPECT_TRUE(merged->tokens.empty());
  EXPECT_TRUE(merged->h.empty());
}

TEST(TokenPool, TokensSortedByRequestThenPositionWithTheirRows) {
  dataflow::TokenPool pool(1, 1, 1);
  // Residual rows in scrambled order; each row's value encodes its key (100·request + pos).
  std::vector<Row> rows;
  const std::vector<std::pair<int64_t, int64_t>> keys = {{5, 2}, {1, 9}, {5, 0}, {0, 3}, {1, 1}};
  for (auto [r, p] : keys) rows.push_back({r, p, 0, 0.f, {static_cast<float>(100 * r + p)}});
  dataflow::TokenBatch res = residual(0, 1, rows);
  res.tokens[2].origin_rank = 3;  // residual metadata is what take() returns
  ASSERT_TRUE(pool.add_residual(res).ok());
  std::vector<Row> outs;
  for (auto [r, p] : keys) outs.push_back({r, p, 0, 1.f, {0.f}});
  std::reverse(outs.begin(), outs.end());
  ASSERT_TRUE(pool.add_expert_outputs(outputs(0, 1, outs)).ok());
  absl::StatusOr<dataflow::MergedTokens> merged = pool.take(0);
  ASSERT_TRUE(merged.ok()) << merged.status();
  const std::vector<std::pair<int64_t, int64_t>> sorted = {{0, 3}, {1, 1}, {1, 9}, {5, 0}, {5, 2}};
  ASSERT_EQ(merged->tokens.size(), sorted.size());
  ASSERT_EQ(merged->h.size(), sorted.size());
  for (size_t i = 0; i < sorted.size(); ++i) {
    EXPECT_EQ(merged->tokens[i].request_id, sorted[i].first) << i;
    EXPECT_EQ(merged->tokens[i].position, sorted[i].second) << i;
    EXPECT_EQ(merged->h[i], static_cast<float>(100 * sorted[i].first + sorted[i].second)) << i;
  }
  EXPECT_EQ(merged->tokens[3].origin_rank, 3);  // (5, 0)
}

// A bucket finds its entries by scanning runs of consecutive positions while it holds a few,
// and through a hash index past TokenPool::Bucket::kMaxRuns runs: every lookup must find the
// same entry either way, across the switch (made inside a batch), and a rejected batch must
// leave the pool as it was whether its new entries went into runs or into the index.
TEST(TokenPool, EntriesFoundTheSameBeforeAndAfterTheBucketIndexesThem) {
  for (const int num_single : {2, 12}) {  // 4 runs in all, or 14 (past the 8 kept as runs)
    dataflow::TokenPool pool(/*hidden=*/1, /*num_topk=*/2, /*expected_expert_messages=*/2);
    // Keys: request 1 positions 0..4 (one run), request 2 positions 7 and 9 (two runs, not
    // consecutive), then single-position requests 10, 11, ...; value 100·request + position.
    std::vector<std::pair<int64_t, int64_t>> keys;
    for (int64_t p = 0; p < 5; ++p) keys.emplace_back(1, p);
    keys.emplace_back(2, 7);
    keys.emplace_back(2, 9);
    for (int i = 0; i < num_single; ++i) keys.emplace_back(10 + i, 3);
    const auto value = [](std::pair<int64_t, int64_t> k) {
      return static_cast<float>(100 * k.first + k.second);
    };
    std::vector<Row> res;
    for (const auto& k : keys) res.push_back({k.first, k.second, 0, 0.f, {value(k)}});
    ASSERT_TRUE(pool.add_residual(residual(0, 1, res)).ok());
    // A batch that brings tokens the residual did not (new entries, enough to pass the runs
    // in the small case too) and ends on a duplicate: refused, nothing of it kept.
    std::vector<Row> bad;
    for (int i = 0; i < 10; ++i) bad.push_back({500 + 2 * i, 0, 0, 1.f, {1.f}});
    bad.push_back({1, 2, 1, 1.f, {1.f}});
    bad.push_back({1, 2, 1, 1.f, {1.f}});
    EXPECT_THAT(pool.add_expert_outputs(outputs(0, 1, bad)).message(), HasSubstr("twice"));
    EXPECT_EQ(pool.num_tokens(0), static_cast<int64_t>(keys.size())) << num_single;
    // Rank 0 in reverse key order, rank 1 in key order, as two messages.
    std::vector<Row> first, second;
    for (auto k = keys.rbegin(); k != keys.rend(); ++k) {
      first.push_back({k->first, k->second, 0, 0.5f, {value(*k)}});
    }
    for (const auto& k : keys) second.push_back({k.first, k.second, 1, 0.25f, {2.f * value(k)}});
    ASSERT_TRUE(pool.add_expert_outputs(outputs(0, 1, first)).ok());
    // A rank-0 row again is a duplicate of what the first message brought.
    EXPECT_FALSE(pool.add_expert_outputs(outputs(0, 1, {{2, 9, 0, 0.5f, {1.f}}})).ok());
    ASSERT_TRUE(pool.add_expert_outputs(outputs(0, 1, second)).ok());
    absl::StatusOr<dataflow::MergedTokens> merged = pool.take(0);
    ASSERT_TRUE(merged.ok()) << merged.status();
    ASSERT_EQ(merged->tokens.size(), keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {  // keys are listed in (request, position) order
      EXPECT_EQ(merged->tokens[i].request_id, keys[i].first) << i;
      EXPECT_EQ(merged->tokens[i].position, keys[i].second) << i;
      const float v = value(keys[i]);
      EXPECT_EQ(merged->h[i], v + (0.5f * v + 0.25f * (2.f * v))) << i;
    }
  }
}

}  // namespace
}  // namespace muflow::engine

// ---------------------------------------------------------------------------------------------
// Per-request readiness (the async wiring): a request's group is ready once its residual and
// every token's k outputs arrived, whatever batches and iterations carried them.

namespace muflow::engine {
namespace {

TEST(TokenPoolPerRequest, OutOfOrderTopkOutputsMergeBitwiseInRankOrder) {
  const std::vector<float> expected = merge_in_order();
  ASSERT_FALSE(expected.empty());
  dataflow::TokenPool pool = dataflow::TokenPool::per_request(kHidden, 3);
  // Each of the k outputs comes alone, from a different "expert device", ranks reversed,
  // some before the residual; iteration numbers are meaningless here.
  ASSERT_TRUE(pool.add_expert_outputs(outputs(7, kHidden, {{0, 0, 2, 1.f, kY2}})).ok());
  ASSERT_TRUE(pool.add_expert_outputs(outputs(3, kHidden, {{0, 1, 0, 1.f, kY1}})).ok());
  ASSERT_TRUE(pool.add_residual(residual(
                      1, kHidden, {{0, 1, 0, 0.f, kResidualB}, {0, 0, 0, 0.f, kResidualA}}))
                  .ok());
  ASSERT_TRUE(pool.add_expert_outputs(outputs(9, kHidden, {{0, 0, 1, 1.f, kY1}})).ok());
  ASSERT_TRUE(pool.add_expert_outputs(outputs(9, kHidden, {{0, 1, 2, 1.f, kY0}})).ok());
  ASSERT_TRUE(pool.add_expert_outputs(outputs(2, kHidden, {{0, 0, 0, 1.f, kY0}})).ok());
  EXPECT_EQ(pool.ready_tokens(), 0) << "token (0,1) still lacks rank 1";
  absl::StatusOr<dataflow::MergedTokens> none = pool.take_ready(100);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->tokens.empty());
  ASSERT_TRUE(pool.add_expert_outputs(outputs(4, kHidden, {{0, 1, 1, 1.f, kY2}})).ok());
  EXPECT_EQ(pool.ready_tokens(), 2);
  absl::StatusOr<dataflow::MergedTokens> merged = pool.take_ready(100);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->iteration, -1);
  ASSERT_EQ(merged->tokens.size(), 2u);
  EXPECT_EQ(merged->tokens[0].position, 0);
  EXPECT_TRUE(bitwise_equal(merged->h, expected));
  EXPECT_EQ(pool.ready_tokens(), 0);
  EXPECT_EQ(pool.num_held_requests(), 0);
}

TEST(TokenPoolPerRequest, ARequestFinishesWhileAnotherIsMidFlight) {
  dataflow::TokenPool pool = dataflow::TokenPool::per_request(1, 2);
  // Requests 4 and 9 arrive in one residual batch (one attention run).
  ASSERT_TRUE(
      pool.add_residual(residual(0, 1, {{4, 10, 0, 0.f, {1.f}}, {9, 3, 0, 0.f, {2.f}}})).ok());
  ASSERT_TRUE(pool.add_expert_outputs(
                      outputs(0, 1, {{9, 3, 0, 0.5f, {4.f}}, {4, 10, 1, 0.5f, {8.f}}}))
                  .ok());
  EXPECT_EQ(pool.ready_tokens(), 0);
  ASSERT_TRUE(pool.add_expert_outputs(outputs(0, 1, {{9, 3, 1, 0.5f, {6.f}}})).ok());
  // Request 9 is ready on its own; request 4 still waits for its top-1 output.
  EXPECT_EQ(pool.ready_tokens(), 1);
  absl::StatusOr<dataflow::MergedTokens> first = pool.take_ready(100);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->tokens.size(), 1u);
  EXPECT_EQ(first->tokens[0].request_id, 9);
  EXPECT_EQ(first->h, (std::vector<float>{2.f + 2.f + 3.f}));
  EXPECT_EQ(pool.num_held_requests(), 1);
  // Request 9 finished; its next step never comes. Request 4 completes later.
  ASSERT_TRUE(pool.add_expert_outputs(outputs(1, 1, {{4, 10, 0, 0.25f, {4.f}}})).ok());
  absl::StatusOr<dataflow::MergedTokens> second = pool.take_ready(100);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->tokens.size(), 1u);
  EXPECT_EQ(second->tokens[0].request_id, 4);
  EXPECT_EQ(second->h, (std::vector<float>{1.f + 1.f + 4.f}));
  EXPECT_EQ(pool.num_held_requests(), 0);
}

TEST(TokenPoolPerRequest, NewRequestJoinsARunningWaveAndGroupsAreNeverSplit) {
  dataflow::TokenPool pool = dataflow::TokenPool::per_request(1, 1);
  // The running wave: requests 0 and 1 decoding (one token each).
  ASSERT_TRUE(
      pool.add_residual(residual(5, 1, {{0, 40, 0, 0.f, {0.f}}, {1, 41, 0, 0.f, {0.f}}})).ok());
  ASSERT_TRUE(pool.add_expert_outputs(outputs(5, 1, {{1, 41, 0, 1.f, {1.f}}})).ok());
  // A new request joins with a 3-token prefill chunk from another attention run.
  ASSERT_TRUE(pool.add_residual(residual(6, 1,
                                         {{2, 0, 0, 0.f, {0.f}},
                                          {2, 1, 0, 0.f, {0.f}},
                                          {2, 2, 0, 0.f, {0.f}}}))
                  .ok());
  ASSERT_TRUE(pool.add_expert_outputs(
                      outputs(6, 1, {{2, 0, 0, 1.f, {1.f}}, {2, 2, 0, 1.f, {1.f}}}))
                  .ok());
  EXPECT_EQ(pool.ready_tokens(), 1) << "only request 1 is complete";
  ASSERT_TRUE(pool.add_expert_outputs(outputs(7, 1, {{2, 1, 0, 1.f, {1.f}}})).ok());
  ASSERT_TRUE(pool.add_expert_outputs(outputs(8, 1, {{0, 40, 0, 1.f, {1.f}}})).ok());
  EXPECT_EQ(pool.ready_tokens(), 5);
  // Ready order: request 1, then 2 (3 tokens), then 0. A limit of 3 takes request 1 and
  // stops before request 2's group (1 + 3 > 3): groups are taken whole.
  absl::StatusOr<dataflow::MergedTokens> a = pool.take_ready(3);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->tokens.size(), 1u);
  EXPECT_EQ(a->tokens[0].request_id, 1);
  // A group larger than the limit still goes (alone).
  absl::StatusOr<dataflow::MergedTokens> b = pool.take_ready(2);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->tokens.size(), 3u);
  EXPECT_EQ(b->tokens[0].request_id, 2);
  EXPECT_EQ(b->tokens[2].position, 2);
  absl::StatusOr<dataflow::MergedTokens> c = pool.take_ready(100);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->tokens.size(), 1u);
  EXPECT_EQ(c->tokens[0].request_id, 0);
  EXPECT_EQ(pool.ready_tokens(), 0);
}

TEST(TokenPoolPerRequest, DuplicatesAndASecondResidualAreRejectedWithoutChange) {
  dataflow::TokenPool pool = dataflow::TokenPool::per_request(1, 2);
  ASSERT_TRUE(pool.add_residual(residual(0, 1, {{3, 0, 0, 0.f, {1.f}}})).ok());
  absl::Status again = pool.add_residual(residual(1, 1, {{3, 1, 0, 0.f, {1.f}}}));
  EXPECT_EQ(again.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(again.message()), HasSubstr("second residual for request 3"));
  ASSERT_TRUE(pool.add_expert_outputs(outputs(0, 1, {{3, 0, 1, 1.f, {1.f}}})).ok());
  absl::Status dup = pool.add_expert_outputs(outputs(4, 1, {{3, 0, 1, 1.f, {1.f}}}));
  EXPECT_THAT(std::string(dup.message()), HasSubstr("got top-k rank 1 twice"));
  EXPECT_EQ(pool.ready_tokens(), 0);
  ASSERT_TRUE(pool.add_expert_outputs(outputs(0, 1, {{3, 0, 0, 1.f, {1.f}}})).ok());
  EXPECT_EQ(pool.ready_tokens(), 1);
}

}  // namespace
}  // namespace muflow::engine

namespace muflow::engine {
namespace {

dataflow::TokenBatch with_wave(dataflow::TokenBatch b, int64_t wave) {
  for (dataflow::TokenMeta& m : b.tokens) m.wave = wave;
  return b;
}

// merge = "wave": one attention run's tokens are released together, even when one request
// of it is complete long before another.
TEST(TokenPoolPerWave, AWaveIsReleasedWhole) {
  dataflow::TokenPool pool = dataflow::TokenPool::per_request(1, 1, /*by_wave=*/true);
  ASSERT_TRUE(pool.add_residual(with_wave(
                      residual(0, 1, {{4, 10, 0, 0.f, {1.f}}, {9, 3, 0, 0.f, {2.f}}}), 7))
                  .ok());
  ASSERT_TRUE(pool.add_expert_outputs(with_wave(outputs(0, 1, {{9, 3, 0, 1.f, {5.f}}}), 7)).ok());
  EXPECT_EQ(pool.ready_tokens(), 0) << "request 9 alone is complete, its wave is not";
  // Another wave of the same merge point completes first and goes first.
  ASSERT_TRUE(pool.add_residual(with_wave(residual(0, 1, {{5, 0, 0, 0.f, {0.f}}}), 8)).ok());
  ASSERT_TRUE(pool.add_expert_outputs(with_wave(outputs(0, 1, {{5, 0, 0, 1.f, {1.f}}}), 8)).ok());
  EXPECT_EQ(pool.ready_tokens(), 1);
  ASSERT_TRUE(pool.add_expert_outputs(with_wave(outputs(0, 1, {{4, 10, 0, 1.f, {3.f}}}), 7)).ok());
  EXPECT_EQ(pool.ready_tokens(), 3);
  absl::StatusOr<dataflow::MergedTokens> merged = pool.take_ready(100);
  ASSERT_TRUE(merged.ok()) << merged.status();
  ASSERT_EQ(merged->tokens.size(), 3u);
  EXPECT_EQ(merged->tokens[0].request_id, 5);
  EXPECT_EQ(merged->tokens[1].request_id, 4);
  EXPECT_EQ(merged->tokens[2].request_id, 9);
  EXPECT_EQ(merged->h, (std::vector<float>{1.f, 4.f, 7.f}));
}

// Pools on one thread share their removed buckets (token_pool.cpp keeps them for reuse): a
// bucket that one pool took or dropped must come back empty to another pool of other widths,
// readiness and message counts. Interleaved over many iterations, each merge is checked
// against its hand-computed value (exact in binary) and each completion rule against its
// own counts.
TEST(TokenPool, BucketsReusedAcrossPoolsOfOneThreadStartEmpty) {
  dataflow::TokenPool two(/*hidden=*/2, /*num_topk=*/2, /*expected_expert_messages=*/2);
  dataflow::TokenPool one(/*hidden=*/1, /*num_topk=*/1, /*expected_expert_messages=*/1);
  dataflow::TokenPool per_request = dataflow::TokenPool::per_request(1, 1);
  for (int64_t it = 0; it < 24; ++it) {
    const auto f = static_cast<float>(it);
    // `two` gets its residual and one of its two messages, then waits.
    ASSERT_TRUE(two.add_residual(residual(it, 2, {{3, it, 0, 0.f, {f, 1.f}}})).ok());
    ASSERT_TRUE(two.add_expert_outputs(outputs(it, 2, {{3, it, 0, 0.5f, {2.f, 4.f}}})).ok());
    EXPECT_EQ(two.complete_iteration(), -1) << "iteration " << it << ": one of two messages";
    // `one` completes and is taken (its bucket removed); a rejected batch on it creates and
    // drops a bucket of a later iteration. Its keys are the same every iteration (a stale
    // index would find them), and on odd iterations its expert outputs come first, so a
    // reused bucket is made by them (a stale residual mark would refuse the residual).
    const auto one_residual = [&] {
      return one.add_residual(residual(it, 1, {{5, 0, 0, 0.f, {f}}, {6, 0, 0, 0.f, {1.f}}}));
    };
    const auto one_outputs = [&] {
      return one.add_expert_outputs(outputs(it, 1, {{6, 0, 0, 2.f, {3.f}}, {5, 0, 0, 1.f, {4.f}}}));
    };
    EXPECT_FALSE(
        one.add_expert_outputs(outputs(it + 100, 1, {{5, 0, 0, 1.f, {1.f}}, {5, 0, 0, 1.f, {1.f}}}))
            .ok());
    EXPECT_EQ(one.num_tokens(it + 100), 0);
    if (it % 2 == 1) {
      ASSERT_TRUE(one_outputs().ok()) << "iteration " << it;
      EXPECT_EQ(one.complete_iteration(), -1) << "iteration " << it << ": no residual yet";
      absl::Status s = one_residual();
      ASSERT_TRUE(s.ok()) << "iteration " << it << ": " << s;
    } else {
      ASSERT_TRUE(one_residual().ok()) << "iteration " << it;
      EXPECT_EQ(one.complete_iteration(), -1) << "iteration " << it << ": no outputs yet";
      ASSERT_TRUE(one_outputs().ok()) << "iteration " << it;
    }
    absl::StatusOr<dataflow::MergedTokens> m1 = one.take_ready(100);
    ASSERT_TRUE(m1.ok()) << m1.status();
    ASSERT_EQ(m1->tokens.size(), 2u) << "iteration " << it;
    EXPECT_EQ(m1->iteration, it);
    EXPECT_EQ(m1->h, (std::vector<float>{f + 4.f, 7.f}));  // r + w·y: f + 4, 1 + 2·3
    // A per-request group comes and goes.
    ASSERT_TRUE(per_request.add_residual(residual(0, 1, {{it, 0, 0, 0.f, {1.f}}})).ok());
    EXPECT_EQ(per_request.ready_tokens(), 0);
    ASSERT_TRUE(per_request.add_expert_outputs(outputs(0, 1, {{it, 0, 0, 1.f, {f}}})).ok());
    absl::StatusOr<dataflow::MergedTokens> mr = per_request.take_ready(100);
    ASSERT_TRUE(mr.ok()) << mr.status();
    EXPECT_EQ(mr->h, (std::vector<float>{1.f + f}));
    EXPECT_EQ(per_request.num_held_requests(), 0);
    // `two`'s second message completes it: r + 0.5·y0 + 0.25·y1.
    ASSERT_TRUE(two.add_expert_outputs(outputs(it, 2, {{3, it, 1, 0.25f, {8.f, -4.f}}})).ok());
    ASSERT_EQ(two.complete_iteration(), it);
    absl::StatusOr<dataflow::MergedTokens> m2 = two.take(it);
    ASSERT_TRUE(m2.ok()) << m2.status();
    EXPECT_EQ(m2->h, (std::vector<float>{f + 3.f, 2.f}));  // f + (1 + 2), 1 + (2 - 1)
  }
}

}  // namespace
}  // namespace muflow::engine
