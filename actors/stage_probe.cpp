#include "actors/stage_probe.hpp"

#include <algorithm>
#include <string>

#include "actors/messages.hpp"

namespace muflow::actors {

absl::StatusOr<StageLoad> probe_stages(caf::actor_system& sys, const RunContext& ctx,
                                       const std::function<bool(int64_t device)>& hosted,
                                       std::chrono::milliseconds timeout) {
  caf::scoped_actor self{sys, /*hide=*/true};
  StageLoad load;
  absl::Status status;
  auto here = [&](const StageSite& site) { return !hosted || hosted(site.device); };
  // One request of `atom` to `stage`; adds the answer (negatives as 0) to `sum`.
  auto ask = [&](const caf::actor& stage, auto atom, int64_t& sum, const char* what) {
    if (!stage || !status.ok()) return;
    self->request(stage, timeout, atom)
        .receive([&](int64_t n) { sum += std::max<int64_t>(0, n); },
                 [&](const caf::error& err) {
                   status =
                       absl::InternalError(std::string("a ") + what +
                                           " stage did not report its state: " + sys.render(err));
                 });
  };
  const ActorTable& t = ctx.actors;
  for (size_t b = 0; b < t.attention.size(); ++b) {
    for (size_t r = 0; r < t.attention[b].size(); ++r) {
      if (!here(ctx.sites.attention.at(b).at(r))) continue;
      ask(t.attention[b][r], kv_atom::value, load.kv_bytes, "attention");
      ask(t.attention[b][r], depth_atom::value, load.queued_attention_tokens, "attention");
    }
  }
  for (size_t b = 0; b < t.experts.size(); ++b) {
    for (size_t e = 0; e < t.experts[b].size(); ++e) {
      if (!here(ctx.sites.experts.at(b).at(e))) continue;
      ask(t.experts[b][e], depth_atom::value, load.queued_expert_tokens, "expert");
    }
  }
  for (size_t r = 0; r < t.samplers.size(); ++r) {
    if (!here(ctx.sites.samplers.at(r))) continue;
    ask(t.samplers[r], depth_atom::value, load.queued_sampler_tokens, "sampler");
  }
  if (!status.ok()) return status;
  return load;
}

}  // namespace muflow::actors
