// Whole contributions (actors/contribution.hpp): a source's rows in one batch with a
// destination per row, which the concatenation rule splits itself. The rule delivers exactly
// what it delivers for the split form of the same rows (each destination's rows and
// activations, the row flows), mixed with split sources too; `split_whole` makes that split
// form; malformed whole contributions are refused with the collective and source named.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/contribution.hpp"
#include "actors/run_context.hpp"
#include "actors/wiring_graph.hpp"
#include "started_wiring.hpp"

namespace muflow::actors {
namespace {

using engine::dataflow::Activations;
using engine::dataflow::LayerId;
using engine::dataflow::Payload;
using engine::dataflow::StageKind;
using engine::dataflow::TokenBatch;
using engine::dataflow::TokenBatchPtr;

// Deterministic pseudo-random numbers in [0, mod).
struct Lcg {
  uint64_t state;
  uint64_t next(uint64_t mod) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % mod;
  }
};

// Source `source`'s whole contribution of `n` random rows for destinations in
// [0, num_dests), `width` activation floats per row (row r's floats are source*1000 + r*10 +
// column; request id source*1000 + r, so every row is distinct).
ContributionPtr random_whole(Lcg& rng, int32_t source, int64_t n, size_t num_dests, int64_t width) {
  auto c = std::make_shared<Contribution>();
  c->iteration = 5;
  c->source = source;
  if (n == 0) return c;
  auto b = std::make_shared<TokenBatch>();
  b->payload = Payload::kExpertInputs;
  b->iteration = 5;
  b->act = std::make_shared<Activations>(n, width);
  for (int64_t r = 0; r < n; ++r) {
    engine::dataflow::TokenMeta m;
    m.request_id = source * 1000 + r;
    m.topk_rank = static_cast<int16_t>(r % 4);
    b->tokens.push_back(m);
    for (int64_t col = 0; col < width; ++col) {
      b->act->row(r)[col] = static_cast<float>(source * 1000 + r * 10 + col);
    }
    c->row_dest.push_back(static_cast<int32_t>(rng.next(num_dests)));
  }
  c->whole = std::move(b);
  return c;
}

LayerId expert_layer(int32_t dst) { return {StageKind::kExpert, 0, dst}; }

void expect_same_delivery(const Delivery& got, const Delivery& want, const std::string& what) {
  ASSERT_EQ(got.out.size(), want.out.size()) << what;
  for (size_t d = 0; d < want.out.size(); ++d) {
    ASSERT_EQ(got.out[d] == nullptr, want.out[d] == nullptr) << what << ", destination " << d;
    if (!want.out[d]) continue;
    const TokenBatch& g = *got.out[d];
    const TokenBatch& w = *want.out[d];
    ASSERT_EQ(g.num_tokens(), w.num_tokens()) << what << ", destination " << d;
    for (size_t r = 0; r < w.tokens.size(); ++r) {
      EXPECT_EQ(g.tokens[r].request_id, w.tokens[r].request_id) << what << ", row " << r;
      EXPECT_EQ(g.tokens[r].topk_rank, w.tokens[r].topk_rank) << what << ", row " << r;
    }
    EXPECT_EQ(g.layer.kind, w.layer.kind);
    EXPECT_EQ(g.layer.index, w.layer.index);
    EXPECT_EQ(g.payload, w.payload);
    EXPECT_EQ(g.iteration, w.iteration);
    EXPECT_EQ(g.act->num_rows, g.num_tokens()) << what << ", destination " << d;
    EXPECT_EQ(g.act->data, w.act->data) << what << ", destination " << d;
  }
  ASSERT_EQ(got.flows.size(), want.flows.size()) << what;
  for (size_t f = 0; f < want.flows.size(); ++f) {
    EXPECT_EQ(got.flows[f].source, want.flows[f].source) << what << ", flow " << f;
    EXPECT_EQ(got.flows[f].dest, want.flows[f].dest) << what << ", flow " << f;
    EXPECT_EQ(got.flows[f].rows, want.flows[f].rows) << what << ", flow " << f;
  }
}

TEST(WholeContribution, ConcatDeliversWhatItDeliversForTheSplitForm) {
  const std::shared_ptr<RunContext> ctx = testing::started_wiring("sync", 1, 2, 8, 2);
  const std::shared_ptr<const CollectiveRule> rule = concat_rule();
  ASSERT_TRUE(rule->takes_whole_rows());
  Lcg rng{7};
  for (int call = 0; call < 12; ++call) {
    const size_t num_dests = call % 3 == 0 ? 3 : 40;
    const int64_t width = call % 2 == 0 ? 0 : 3;
    std::vector<ContributionPtr> whole, split, mixed;
    for (int32_t src = 0; src < 5; ++src) {
      const int64_t n = src == 2 ? 0 : static_cast<int64_t>(rng.next(30));  // one sends none
      whole.push_back(random_whole(rng, src, n, num_dests, width));
      absl::StatusOr<ContributionPtr> s =
          split_whole(whole.back(), num_dests, expert_layer, Payload::kExpertOutputs);
      ASSERT_TRUE(s.ok()) << s.status();
      ASSERT_FALSE((*s)->is_whole());
      split.push_back(*s);
      mixed.push_back(src % 2 == 0 ? whole.back() : *s);
    }
    // The split form is group_rows's: ascending destinations, each part's rows in order.
    for (const ContributionPtr& s : split) {
      for (size_t p = 1; p < s->dests.size(); ++p) ASSERT_LT(s->dests[p - 1], s->dests[p]);
      for (size_t p = 0; p < s->parts.size(); ++p) {
        EXPECT_EQ(s->parts[p]->layer.index, s->dests[p]);
        EXPECT_EQ(s->parts[p]->payload, Payload::kExpertOutputs);  // given, not the whole's
        EXPECT_EQ(s->parts[p]->act->num_rows, s->parts[p]->num_tokens());
      }
    }
    const absl::StatusOr<Delivery> want =
        rule->deliver(*ctx, CollectiveKind::kDispatch, 0, split, num_dests, 5, width);
    ASSERT_TRUE(want.ok()) << want.status();
    const absl::StatusOr<Delivery> got =
        rule->deliver(*ctx, CollectiveKind::kDispatch, 0, whole, num_dests, 5, width);
    ASSERT_TRUE(got.ok()) << got.status();
    expect_same_delivery(*got, *want, "whole, call " + std::to_string(call));
    const absl::StatusOr<Delivery> got_mixed =
        rule->deliver(*ctx, CollectiveKind::kDispatch, 0, mixed, num_dests, 5, width);
    ASSERT_TRUE(got_mixed.ok()) << got_mixed.status();
    expect_same_delivery(*got_mixed, *want, "mixed, call " + std::to_string(call));
    // And both are the plain reference: destination d gets, source by source, the rows of
    // that source for d in their order.
    for (size_t d = 0; d < num_dests; ++d) {
      std::vector<int64_t> ids;
      for (const ContributionPtr& c : whole) {
        for (size_t r = 0; r < c->row_dest.size(); ++r) {
          if (c->row_dest[r] == static_cast<int32_t>(d))
            ids.push_back(c->whole->tokens[r].request_id);
        }
      }
      const TokenBatchPtr& out = got->out[d];
      ASSERT_EQ(out ? out->num_tokens() : 0, static_cast<int64_t>(ids.size()));
      for (size_t r = 0; r < ids.size(); ++r) EXPECT_EQ(out->tokens[r].request_id, ids[r]);
    }
  }
}

TEST(WholeContribution, MalformedWholeContributionsAreRefused) {
  const std::shared_ptr<RunContext> ctx = testing::started_wiring("sync", 1, 2, 8, 2);
  Lcg rng{3};
  const auto refusal = [&](const ContributionPtr& c, int64_t width) {
    absl::StatusOr<Delivery> d =
        concat_rule()->deliver(*ctx, CollectiveKind::kCombine, 1, {c}, 4, 5, width);
    EXPECT_FALSE(d.ok());
    return std::string(d.status().message());
  };
  ContributionPtr c = random_whole(rng, 0, 6, 4, 0);
  c->row_dest.pop_back();  // a row without a destination
  EXPECT_NE(refusal(c, 0).find("collective b1: source 0 sent 6 rows with 5 destinations"),
            std::string::npos);
  c = random_whole(rng, 0, 6, 4, 0);
  c->row_dest[3] = 4;  // outside [0, 4)
  EXPECT_NE(refusal(c, 0).find("a row for destination 4 of [0, 4)"), std::string::npos);
  c = random_whole(rng, 0, 6, 4, 2);
  EXPECT_NE(refusal(c, 3).find("width 3 expected"), std::string::npos);  // rows of width 2
  c = random_whole(rng, 0, 6, 4, 0);
  c->dests.push_back(1);  // both forms at once
  c->parts.push_back(c->whole);
  EXPECT_NE(refusal(c, 0).find("1 parts"), std::string::npos);
  // split_whole refuses what it cannot split, and returns a split contribution as it is.
  c = random_whole(rng, 0, 6, 4, 0);
  c->row_dest[0] = -1;
  EXPECT_FALSE(split_whole(c, 4, expert_layer, Payload::kExpertInputs).ok());
  c = random_whole(rng, 0, 6, 4, 0);
  c->row_dest.pop_back();
  EXPECT_FALSE(split_whole(c, 4, expert_layer, Payload::kExpertInputs).ok());
  auto split = std::make_shared<Contribution>();
  absl::StatusOr<ContributionPtr> same =
      split_whole(split, 4, expert_layer, Payload::kExpertInputs);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, split);
}

}  // namespace
}  // namespace muflow::actors
