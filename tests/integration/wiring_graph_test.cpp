// Wirings as graphs (actors/wirings/): the registry knows exactly the names the topology parser
// accepts, and each wiring declares the graph its paper describes: which expert stages exist
// on which device, which edges are barriers, where residuals go and how merge points release.
// The bitwise-invariance tests run these graphs; this test reads them.
#include "actors/wiring_graph.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "actors/contribution.hpp"
#include "actors/run_context.hpp"
#include "actors/wirings/registry.hpp"
#include "engine/planning/placement.hpp"
#include "engine/topology/wiring_names.hpp"
#include "started_wiring.hpp"

namespace muflow::actors {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(WiringRegistry, KnowsExactlyTheParsersNames) {
  std::vector<std::string> parser(engine::topology::kKnownWirings.begin(),
                                  engine::topology::kKnownWirings.end());
  EXPECT_EQ(available_wirings(), parser);
  for (const std::string& name : parser) {
    absl::StatusOr<const Wiring*> w = find_wiring(name);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ((*w)->name(), name);
  }
  absl::StatusOr<const Wiring*> unknown = find_wiring("ring");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("wiring 'ring' is not available in this build; expected one of: sync, "
                        "async, harmoeny, moeshard, exflow"));
  EXPECT_EQ(wirings_with([](const WiringTraits& t) { return t.per_block_placement; }),
            "\"sync\" or \"exflow\"");
  EXPECT_EQ(wirings_with([](const WiringTraits& t) { return t.disaggregated_attention; }),
            "\"async\" or \"async-replicated\"");
}

// A run context with 4 devices, 2 layers, 8 experts, round-robin placement (no actors): what
// a wiring sees when a run starts.
std::shared_ptr<const WiringRun> start(const std::string& name, std::shared_ptr<RunContext>* out) {
  *out = testing::started_wiring(name, 4, 2, 8, 2);
  return (*out)->wiring;
}

TEST(WiringGraph, SyncIsBarrierEpWithOneStagePerExpert) {
  std::shared_ptr<RunContext> ctx;
  const WiringGraph& g = start("sync", &ctx)->graph();
  EXPECT_EQ(g.pacing, Pacing::kIteration);
  EXPECT_EQ(g.dispatch, EdgeKind::kBarrier);
  EXPECT_EQ(g.combine, EdgeKind::kBarrier);
  EXPECT_EQ(g.merge, MergeRule::kIteration);
  ASSERT_EQ(g.slot_device.size(), 2u);
  EXPECT_THAT(g.slot_device[1], ElementsAre(0, 1, 2, 3, 0, 1, 2, 3));  // expert e on e mod 4
  EXPECT_THAT(g.residual_targets,
              ElementsAre(ElementsAre(0), ElementsAre(1), ElementsAre(2), ElementsAre(3)));
  EXPECT_EQ(g.residual_sources()[2], 1);
  EXPECT_EQ(g.continuation, nullptr);
  EXPECT_TRUE(g.ranks_independent());  // in one process, only ranks with tokens run
}

TEST(WiringGraph, AsyncIsPointToPointOnDisaggregatedDevices) {
  std::shared_ptr<RunContext> ctx;
  const WiringGraph& g = start("async", &ctx)->graph();
  EXPECT_EQ(g.pacing, Pacing::kPerRequest);
  EXPECT_EQ(g.dispatch, EdgeKind::kPointToPoint);
  EXPECT_EQ(g.combine, EdgeKind::kPointToPoint);
  EXPECT_EQ(g.input, InputRule::kFifo);
  EXPECT_EQ(g.merge, MergeRule::kRequest);
  EXPECT_TRUE(g.batch_hold);
  EXPECT_THAT(ctx->placement.rank_device, ElementsAre(0, 1));  // attention on half the devices
  EXPECT_THAT(g.slot_device[0], ElementsAre(2, 3, 2, 3, 2, 3, 2, 3));  // experts on the rest
  EXPECT_FALSE(g.ranks_independent());  // paced per request: no iterations to thin out
}

TEST(WiringGraph, HarmoenyAndMoeShardHaveOneExpertStagePerDevice) {
  for (const std::string name : {"harmoeny", "moeshard"}) {
    std::shared_ptr<RunContext> ctx;
    const WiringGraph& g = start(name, &ctx)->graph();
    EXPECT_EQ(g.dispatch, EdgeKind::kBarrier) << name;
    EXPECT_THAT(g.slot_device[1], ElementsAre(0, 1, 2, 3)) << name;
    EXPECT_NE(g.dispatch_rule, concat_rule()) << name << ": rebalancing / all-gather dispatch";
    EXPECT_TRUE(g.ranks_independent()) << name;
  }
  std::shared_ptr<RunContext> ctx;
  EXPECT_EQ(start("harmoeny", &ctx)->graph().combine_rule, concat_rule());
  EXPECT_NE(start("moeshard", &ctx)->graph().combine_rule, concat_rule());  // reduce-scatter
}

TEST(WiringGraph, ExflowSendsResidualsToEveryRankAndReplicatesTheKvCache) {
  std::shared_ptr<RunContext> ctx;
  std::shared_ptr<const WiringRun> run = start("exflow", &ctx);
  const WiringGraph& g = run->graph();
  for (const auto& targets : g.residual_targets) EXPECT_THAT(targets, ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(g.residual_sources()[1], 4);
  EXPECT_FALSE(g.ranks_independent());  // a rank's tokens may continue on another rank
  ASSERT_NE(g.continuation, nullptr);
  // A request with one token continues on the rank of its top-1 expert's device; a request
  // with two tokens in the batch stays home.
  std::vector<engine::dataflow::TokenMeta> meta(3);
  meta[0].request_id = 7;
  meta[1].request_id = 9;
  meta[2].request_id = 9;
  const std::vector<int32_t> ids = {6, 1, 5, 0, 3, 2};  // top-2 per token
  EXPECT_THAT(g.continuation->next_ranks(*ctx, 0, 0, meta, ids), ElementsAre(2, 0, 0));
  // Each rank owns its replica (no cache shared between stages), kept equal by messages.
  EXPECT_TRUE(g.kv_replicated);
  EXPECT_NE(run->kv_cache(1, 0, 16), run->kv_cache(1, 3, 16));
  std::shared_ptr<RunContext> sync_ctx;
  EXPECT_FALSE(start("sync", &sync_ctx)->graph().kv_replicated);
}

// The default barrier rule (actors/collective.cpp): each destination's rows in source order,
// one flow per (source, destination) pair that moved rows, and no batch at all for a
// destination no row goes to (Delivery::out is null there; the collective makes the empty
// batch when it sends one), so a combine to many ranks builds only the batches it fills.
TEST(WiringGraph, ConcatRuleBuildsOnlyTheBatchesWithRows) {
  std::shared_ptr<RunContext> ctx;
  start("sync", &ctx);
  const auto part = [](int64_t first_id, int rows) {
    auto b = std::make_shared<engine::dataflow::TokenBatch>();
    b->act = std::make_shared<engine::dataflow::Activations>(rows, 0);
    for (int i = 0; i < rows; ++i) {
      engine::dataflow::TokenMeta m;
      m.request_id = first_id + i;
      b->tokens.push_back(m);
    }
    return b;
  };
  // Source 0 sends 2 rows to expert 1 and 1 to expert 3; source 1 sends 1 row to expert 3 and
  // an empty part to expert 5.
  auto c0 = std::make_shared<Contribution>();
  c0->iteration = 5;
  c0->source = 0;
  c0->dests = {1, 3};
  c0->parts = {part(10, 2), part(20, 1)};
  auto c1 = std::make_shared<Contribution>();
  c1->iteration = 5;
  c1->source = 1;
  c1->dests = {3, 5};
  c1->parts = {part(30, 1), part(40, 0)};
  absl::StatusOr<Delivery> d =
      concat_rule()->deliver(*ctx, CollectiveKind::kDispatch, 1, {c0, c1}, 8, 5, 0);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->out.size(), 8u);
  for (size_t e : {0, 2, 4, 5, 6, 7}) EXPECT_EQ(d->out[e], nullptr) << "expert " << e;
  ASSERT_NE(d->out[1], nullptr);
  ASSERT_NE(d->out[3], nullptr);
  EXPECT_EQ(d->out[1]->num_tokens(), 2);
  ASSERT_EQ(d->out[3]->num_tokens(), 2);
  EXPECT_EQ(d->out[3]->tokens[0].request_id, 20);  // source order
  EXPECT_EQ(d->out[3]->tokens[1].request_id, 30);
  EXPECT_EQ(d->out[3]->act->num_rows, 2);
  EXPECT_EQ(d->out[3]->iteration, 5);
  EXPECT_EQ(d->out[3]->payload, engine::dataflow::Payload::kExpertInputs);
  EXPECT_EQ(d->out[3]->layer.kind, engine::dataflow::StageKind::kExpert);
  EXPECT_EQ(d->out[3]->layer.block, 1);
  EXPECT_EQ(d->out[3]->layer.index, 3);
  ASSERT_EQ(d->flows.size(), 3u);  // the empty part moved nothing
  EXPECT_EQ(d->flows[0].source, 0);
  EXPECT_EQ(d->flows[0].dest, 1);
  EXPECT_EQ(d->flows[0].rows, 2);
  EXPECT_EQ(d->flows[1].dest, 3);
  EXPECT_EQ(d->flows[2].source, 1);
  EXPECT_EQ(d->flows[2].dest, 3);
  EXPECT_EQ(d->flows[2].rows, 1);
}

}  // namespace
}  // namespace muflow::actors
