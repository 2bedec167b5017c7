#include "actors/collective.hpp"

#include <map>

#include "absl/strings/str_format.h"
#include "actors/messages.hpp"

namespace muflow::actors {
namespace {

struct CollectiveState {
  std::map<int64_t, std::vector<ContributionPtr>> pending;  // iteration → by source
  static inline const char* name = "muflow.collective";
};

caf::actor destination(const RunContext& ctx, CollectiveKind kind, int32_t block, size_t slot) {
  if (kind == CollectiveKind::kDispatch) return ctx.actors.experts[block][slot];
  const auto num_layers = static_cast<int32_t>(ctx.model->config().num_layers);
  return block + 1 < num_layers ? ctx.actors.attention[block + 1][slot] : ctx.actors.samplers[slot];
}

caf::behavior collective_behavior(caf::stateful_actor<CollectiveState>* self, RunContextPtr ctx,
                                  CollectiveKind kind, int32_t block) {
  const size_t num_sources = kind == CollectiveKind::kDispatch
                                 ? static_cast<size_t>(ctx->num_ranks)
                                 : static_cast<size_t>(ctx->model->config().num_experts);
  return {[=](contrib_atom, const ContributionPtr& c) {
    auto& slot = self->state.pending[c->iteration];
    if (slot.empty()) slot.resize(num_sources);
    if (c->source < 0 || static_cast<size_t>(c->source) >= num_sources || slot[c->source]) {
      self->send(ctx->actors.coordinator, failed_atom::value,
                 absl::StrFormat("collective b%d: bad or duplicate source %d", block, c->source));
      return;
    }
    slot[c->source] = c;
    for (const ContributionPtr& p : slot) {
      if (!p) return;  // barrier not complete yet
    }
    const size_t num_dests = slot.front()->parts.size();
    std::vector<int64_t> tokens_per_device(ctx->placement.num_devices, 0);
    for (size_t d = 0; d < num_dests; ++d) {
      auto out = std::make_shared<engine::TokenBatch>();
      const engine::TokenBatch& first = *slot.front()->parts[d];
      out->layer = first.layer;
      out->payload = first.payload;
      out->iteration = c->iteration;
      out->act = std::make_shared<engine::Activations>(0, first.act ? first.act->width : 0);
      for (const ContributionPtr& p : slot) {  // source order: deterministic
        const engine::TokenBatch& part = *p->parts[d];
        out->tokens.insert(out->tokens.end(), part.tokens.begin(), part.tokens.end());
        if (part.act) {
          out->act->data.insert(out->act->data.end(), part.act->data.begin(),
                                part.act->data.end());
          out->act->num_rows += part.act->num_rows;
        }
      }
      if (kind == CollectiveKind::kDispatch) {
        tokens_per_device[ctx->placement.expert_device[d]] += out->num_tokens();
      }
      self->send(destination(*ctx, kind, block, d), batch_atom::value, out);
    }
    if (kind == CollectiveKind::kDispatch) {
      self->send(ctx->actors.coordinator, load_atom::value, static_cast<int64_t>(block),
                 c->iteration, tokens_per_device);
    }
    if (ctx->trace) {
      ctx->trace->instant(kind == CollectiveKind::kDispatch ? "dispatch all-to-all"
                                                            : "combine all-to-all",
                          0, 0, ctx->seconds_since_start(self->home_system().clock().now()) * 1e6,
                          engine::InstantScope::kGlobal,
                          nlohmann::json{{"block", block}, {"iteration", c->iteration}});
    }
    self->state.pending.erase(c->iteration);
  }};
}

}  // namespace

caf::actor spawn_collective(caf::actor_system& sys, RunContextPtr ctx, CollectiveKind kind,
                            int32_t block) {
  return sys.spawn(collective_behavior, std::move(ctx), kind, block);
}

}  // namespace muflow::actors
