// A barrier collective (actors/collective.cpp) refuses a contribution it cannot place, with an
// error to the coordinator naming the collective and the source: under the default
// (concatenation) rule a part for a destination outside the collective (its rows were skipped
// and lost), a part without its batch, or parts and destinations of different counts; under
// any rule a source outside the collective. A peer process's contributions reach it after the
// cluster's checks; this is the check every contribution gets.
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/collective.hpp"
#include "actors/contribution.hpp"
#include "actors/messages.hpp"
#include "actors/run_context.hpp"
#include "engine/exec/sim_executor.hpp"
#include "started_wiring.hpp"

namespace muflow::actors {
namespace {

using engine::dataflow::Activations;
using engine::dataflow::Payload;
using engine::dataflow::StageKind;
using engine::dataflow::TokenBatch;

// A sync run on one device, one block, 4 experts top-1 (one DP rank), whose coordinator is
// `coordinator`; every stage on device 0, which runs the sim executor (rows carry no
// activations).
std::shared_ptr<RunContext> context(const caf::actor& coordinator) {
  std::shared_ptr<RunContext> ctx = testing::started_wiring("sync", 1, 1, 4, 1);
  ctx->actors.coordinator = coordinator;
  ctx->executors.push_back(std::make_shared<engine::exec::SimExecutor>(
      ctx->config, kernels::sim::find_device_kind("H100-SXM").value(),
      std::make_shared<const kernels::sim::CostModel>(), nullptr, kernels::sim::Precision::kBF16));
  ctx->sites.attention.assign(1, std::vector<StageSite>(static_cast<size_t>(ctx->num_ranks)));
  ctx->sites.experts.assign(1,
                            std::vector<StageSite>(static_cast<size_t>(ctx->graph().num_slots())));
  ctx->sites.samplers.assign(static_cast<size_t>(ctx->num_ranks), StageSite{});
  return ctx;
}

// Rank 0's contribution to iteration 0 with one part per entry of `dests` (one row each), or
// a null part where `null_part`.
ContributionPtr contribution(int32_t source, const std::vector<int32_t>& dests,
                             bool null_part = false) {
  auto c = std::make_shared<Contribution>();
  c->iteration = 0;
  c->source = source;
  for (const int32_t d : dests) {
    c->dests.push_back(d);
    if (null_part) {
      c->parts.push_back(nullptr);
      continue;
    }
    auto b = std::make_shared<TokenBatch>();
    b->layer = {StageKind::kExpert, 0, d};
    b->payload = Payload::kExpertInputs;
    b->act = std::make_shared<Activations>(0, 0);
    b->tokens.push_back({});
    b->act->num_rows = 1;
    c->parts.push_back(b);
  }
  return c;
}

// The coordinator's failure message for `c` sent to a fresh dispatch collective.
std::string refusal(const ContributionPtr& c) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::shared_ptr<RunContext> ctx = context(self);
  const caf::actor collective = spawn_collective(sys, ctx, CollectiveKind::kDispatch, 0);
  self->send(collective, contrib_atom::value, c);
  std::string said;
  self->receive([&](failed_atom, const std::string& what) { said = what; },
                caf::after(std::chrono::seconds(10)) >> [&] { said = "<no failure reported>"; });
  self->send_exit(collective, caf::exit_reason::user_shutdown);
  return said;
}

TEST(CollectiveInput, APartForADestinationOutsideTheCollectiveIsRefused) {
  EXPECT_EQ(refusal(contribution(0, {1, 4})),
            "collective b0: source 0 sent a part for destination 4 of [0, 4)");
  EXPECT_EQ(refusal(contribution(0, {-1})),
            "collective b0: source 0 sent a part for destination -1 of [0, 4)");
}

TEST(CollectiveInput, APartWithoutItsBatchIsRefused) {
  EXPECT_EQ(refusal(contribution(0, {2}, /*null_part=*/true)),
            "collective b0: source 0 sent a part for destination 2 of [0, 4) without rows");
  ContributionPtr fewer_parts = contribution(0, {1, 2});
  fewer_parts->parts.pop_back();
  EXPECT_EQ(refusal(fewer_parts), "collective b0: source 0 sent 1 parts for 2 destinations");
}

TEST(CollectiveInput, ASourceOutsideTheCollectiveIsRefused) {
  EXPECT_EQ(refusal(contribution(3, {1})), "collective b0: bad source 3");
}

}  // namespace
}  // namespace muflow::actors
