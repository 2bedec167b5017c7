#include "actors/collective.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_format.h"
#include "actors/messages.hpp"
#include "engine/splitmix64.hpp"
#include "kernels/assert.hpp"
#include "transport/aurora_order.hpp"

namespace muflow::actors {
namespace {

struct CollectiveState {
  std::map<int64_t, std::vector<ContributionPtr>> pending;  // iteration → by source
  // iteration → this process's contributions not yet forwarded to the peers (replicas)
  std::map<int64_t, std::vector<ContributionPtr>> outgoing;
  std::map<int64_t, std::vector<double>> arrived_us;        // iteration → receipt time by source
  // Sparse iterations (RunContext::sparse_iterations): iteration → the DP ranks taking part
  // (ascending), from the coordinator before any contribution of the iteration.
  std::map<int64_t, std::vector<int32_t>> ranks;
  std::map<int64_t, size_t> num_arrived;  // sparse iterations: iteration → contributions so far
  ContributionPtr absent;  // sparse dispatch: what a rank that took no part contributed (nothing)
  static inline const char* name = "muflow.collective";
};

caf::actor destination(const RunContext& ctx, CollectiveKind kind, int32_t block, size_t slot) {
  if (kind == CollectiveKind::kDispatch) return ctx.actors.experts[block][slot];
  const auto num_layers = static_cast<int32_t>(ctx.config.num_layers);
  return block + 1 < num_layers ? ctx.actors.attention[block + 1][slot] : ctx.actors.samplers[slot];
}

StageSite source_site(const RunContext& ctx, CollectiveKind kind, int32_t block, size_t source) {
  return kind == CollectiveKind::kDispatch ? ctx.sites.attention[block][source]
                                           : ctx.sites.experts[block][source];
}

StageSite dest_site(const RunContext& ctx, CollectiveKind kind, int32_t block, size_t slot) {
  if (kind == CollectiveKind::kDispatch) return ctx.sites.experts[block][slot];
  const auto num_layers = static_cast<int32_t>(ctx.config.num_layers);
  return block + 1 < num_layers ? ctx.sites.attention[block + 1][slot] : ctx.sites.samplers[slot];
}

// Trace of one completed barrier: each source's wait (from its contribution to completion) on
// its device's wait lane, and one flow arrow per pair of distinct devices that exchanged rows.
void trace_barrier(const RunContext& ctx, CollectiveKind kind, int32_t block, int64_t iteration,
                   size_t num_sources, const std::vector<RowFlow>& flows,
                   const std::vector<double>& arrived_us, double done_us) {
  engine::trace::TraceRecorder& trace = *ctx.trace;
  const char* what = kind == CollectiveKind::kDispatch ? "dispatch" : "combine";
  const std::string wait_name = absl::StrFormat("wait %s b%d", what, block);
  const std::string flow_name = absl::StrFormat("%s b%d", what, block);
  const int64_t num_devices = ctx.placement.num_devices;
  const int64_t kind_index = kind == CollectiveKind::kDispatch ? 0 : 1;
  const int64_t num_layers = ctx.config.num_layers;
  std::vector<char> pair_used(num_devices * num_devices, 0);
  size_t f = 0;  // flows are sorted by (source, dest)
  for (size_t src = 0; src < num_sources; ++src) {
    if (arrived_us[src] < 0) continue;  // a rank that took no part in the iteration
    const StageSite s = source_site(ctx, kind, block, src);
    trace.complete_in(
        "wait", wait_name, s.device, kWaitLaneTid, arrived_us[src], done_us - arrived_us[src],
        nlohmann::json{{"block", block}, {"iteration", iteration}, {"collective", what}});
    for (; f < flows.size() && flows[f].source == static_cast<int32_t>(src); ++f) {
      const StageSite t = dest_site(ctx, kind, block, static_cast<size_t>(flows[f].dest));
      if (t.device == s.device) continue;
      const int64_t pair = s.device * num_devices + t.device;
      if (pair_used[pair]) continue;
      pair_used[pair] = 1;
      const auto id = static_cast<uint64_t>(
          (((iteration * num_layers + block) * 2 + kind_index) * num_devices + s.device) *
              num_devices +
          t.device + 1);
      trace.flow('s', "batch", flow_name, id, s.device, s.tid, arrived_us[src]);
      trace.flow('f', "batch", flow_name, id, t.device, t.tid, done_us);
    }
  }
}

// The empty batch destination `dst` of a barrier gets when no source sent it rows.
engine::dataflow::TokenBatchPtr empty_delivery(const RunContext& ctx, CollectiveKind kind,
                                               int32_t block, size_t dst, int64_t iteration,
                                               int64_t width) {
  return engine::dataflow::make_batch(collective_destination_layer(ctx, kind, block, dst),
                                      kind == CollectiveKind::kDispatch
                                          ? engine::dataflow::Payload::kExpertInputs
                                          : engine::dataflow::Payload::kExpertOutputs,
                                      iteration, width);
}

// Concatenation in source order. Sources outermost, so a source costs only the parts it sent;
// a destination no row goes to is left null (Delivery::out), so a combine to 1,024 ranks of
// which a few took part makes a few batches. A whole contribution (Contribution::is_whole) is
// split here, row by row into its destinations' batches, in the same order its split form
// would give. Errors: InvalidArgument for a part without its batch, for a destination outside
// [0, num_dests) (its rows would be lost), for a part whose activations do not match its rows
// and `width`, or for a whole contribution whose destinations or activations do not match its
// rows.
absl::StatusOr<Delivery> concat_parts(const RunContext& ctx, CollectiveKind kind, int32_t block,
                                      const std::vector<ContributionPtr>& slot, size_t num_dests,
                                      int64_t iteration, int64_t width) {
  for (const ContributionPtr& c : slot) {
    if (c->is_whole()) {
      const engine::dataflow::TokenBatch& all = *c->whole;
      const int64_t n = all.num_tokens();
      if (!c->parts.empty() || !c->dests.empty() || static_cast<int64_t>(c->row_dest.size()) != n ||
          (n > 0 && (!all.act || all.act->width != width ||
                     static_cast<int64_t>(all.act->data.size()) != n * width))) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "collective b%d: source %d sent %d rows with %d destinations, %d parts and %d "
            "activation floats (width %d expected)",
            block, c->source, n, c->row_dest.size(), c->parts.size(),
            all.act ? all.act->data.size() : 0, width));
      }
      for (const int32_t dst : c->row_dest) {
        if (dst < 0 || static_cast<size_t>(dst) >= num_dests) {
          return absl::InvalidArgumentError(
              absl::StrFormat("collective b%d: source %d sent a row for destination %d of [0, %d)",
                              block, c->source, dst, num_dests));
        }
      }
      continue;
    }
    if (c->parts.size() != c->dests.size()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("collective b%d: source %d sent %d parts for %d destinations", block,
                          c->source, c->parts.size(), c->dests.size()));
    }
    for (size_t p = 0; p < c->dests.size(); ++p) {
      const int32_t dst = c->dests[p];
      const bool has_batch = c->parts[p] != nullptr;
      if (dst < 0 || static_cast<size_t>(dst) >= num_dests || !has_batch) {
        return absl::InvalidArgumentError(
            absl::StrFormat("collective b%d: source %d sent a part for destination %d of [0, %d)%s",
                            block, c->source, dst, num_dests, has_batch ? "" : " without rows"));
      }
      const engine::dataflow::TokenBatch& part = *c->parts[p];
      const int64_t n = part.num_tokens();
      if (width > 0 && n > 0 &&
          (!part.act || static_cast<int64_t>(part.act->data.size()) != n * width)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "collective b%d: source %d sent destination %d %d rows with %d activation floats "
            "(width %d expected)",
            block, c->source, dst, n, part.act ? part.act->data.size() : 0, width));
      }
    }
  }
  Delivery d;
  d.out.resize(num_dests);
  // Sizes first, so each destination's rows are copied once, not again at every growth.
  std::vector<int64_t> rows(num_dests, 0);
  size_t num_flows = 0;
  for (const ContributionPtr& c : slot) {
    if (c->is_whole()) {
      for (const int32_t dst : c->row_dest) ++rows[static_cast<size_t>(dst)];
      num_flows += c->row_dest.size();  // at most
      continue;
    }
    for (size_t p = 0; p < c->parts.size(); ++p) {
      const auto dst = static_cast<size_t>(c->dests[p]);
      if (c->parts[p]->num_tokens() == 0) continue;
      rows[dst] += c->parts[p]->num_tokens();
      ++num_flows;
    }
  }
  // Each destination's rows and activations (only destinations with rows have a batch), as
  // a dense table: the row loop below reaches them without going through the batch.
  std::vector<std::vector<engine::dataflow::TokenMeta>*> dest_meta(num_dests, nullptr);
  std::vector<std::vector<float>*> dest_act(num_dests, nullptr);
  for (size_t dst = 0; dst < num_dests; ++dst) {
    if (rows[dst] == 0) continue;
    d.out[dst] = empty_delivery(ctx, kind, block, dst, iteration, width);
    engine::dataflow::TokenBatch& out = *d.out[dst];
    out.tokens.reserve(static_cast<size_t>(rows[dst]));
    out.act->data.reserve(static_cast<size_t>(rows[dst] * width));
    out.act->num_rows = rows[dst];
    dest_meta[dst] = &out.tokens;
    dest_act[dst] = &out.act->data;
  }
  d.flows.reserve(std::min(num_flows, slot.size() * num_dests));
  // A whole source's rows per destination: `rows` reused, all 0 between sources; `used`
  // lists the destinations it touched.
  std::fill(rows.begin(), rows.end(), 0);
  std::vector<int32_t> used;
  for (size_t src = 0; src < slot.size(); ++src) {  // source order: deterministic
    const Contribution& c = *slot[src];
    if (c.is_whole()) {
      const engine::dataflow::TokenBatch& all = *c.whole;
      const size_t n = all.tokens.size();
      for (size_t i = 0; i < n; ++i) {
        const auto dst = static_cast<size_t>(c.row_dest[i]);
        dest_meta[dst]->push_back(all.tokens[i]);
        if (width > 0) {
          const float* row = all.act->row(static_cast<int64_t>(i));
          dest_act[dst]->insert(dest_act[dst]->end(), row, row + width);
        }
        if (rows[dst]++ == 0) used.push_back(static_cast<int32_t>(dst));
      }
      // The source's flows in destination order: a scan of the counts when it reached many
      // destinations (a prefill rank reaches every expert), else a sort of the few it did.
      if (used.size() * 8 >= num_dests) {
        for (size_t dst = 0; dst < num_dests; ++dst) {
          if (rows[dst] == 0) continue;
          d.flows.push_back({static_cast<int32_t>(src), static_cast<int32_t>(dst), rows[dst]});
          rows[dst] = 0;
        }
      } else {
        std::sort(used.begin(), used.end());
        for (const int32_t dst : used) {
          d.flows.push_back({static_cast<int32_t>(src), dst, rows[static_cast<size_t>(dst)]});
          rows[static_cast<size_t>(dst)] = 0;
        }
      }
      used.clear();
      continue;
    }
    for (size_t p = 0; p < c.parts.size(); ++p) {
      const auto dst = static_cast<size_t>(c.dests[p]);
      const engine::dataflow::TokenBatch& part = *c.parts[p];
      if (part.num_tokens() == 0) continue;  // its destination may have no batch
      dest_meta[dst]->insert(dest_meta[dst]->end(), part.tokens.begin(), part.tokens.end());
      if (width > 0) {
        dest_act[dst]->insert(dest_act[dst]->end(), part.act->data.begin(), part.act->data.end());
      }
      d.flows.push_back({static_cast<int32_t>(src), static_cast<int32_t>(dst), part.num_tokens()});
    }
  }
  return d;
}

// The default rule: concatenation in source order.
class ConcatRule final : public CollectiveRule {
 public:
  absl::StatusOr<Delivery> deliver(const RunContext& ctx, CollectiveKind kind, int32_t block,
                                   const std::vector<ContributionPtr>& parts, size_t num_dests,
                                   int64_t iteration, int64_t width) const override {
    return concat_parts(ctx, kind, block, parts, num_dests, iteration, width);
  }
  bool takes_whole_rows() const override { return true; }
};

// A timed channel (sim): the barrier's parts cross it as one all-to-all between devices (the
// parts of all slots on one device travel together, as one buffer per peer), e.g. over the
// big switch in the topology's `a2a_order` (Aurora §4) from `done_s`; returns when each
// device's last incoming part arrives ([num devices] seconds, >= done_s: a destination's
// batch is complete when its device's is) and the port-load lower bound of that all-to-all
// (seconds; transport/all_to_all_order.hpp).
struct NetworkDelivery {
  /// [num devices] when each device's last incoming part arrives (>= done_s); a destination's
  /// batch is complete then (empty: nothing crossed a network, every batch at done_s)
  std::vector<double> device_done_s;
  double bound_s = 0.0;
  double end_s = 0.0;  ///< when the last transfer finished (>= done_s)
};

NetworkDelivery network_delivery(const RunContext& ctx, CollectiveKind kind, int32_t block,
                                 int64_t iteration, const std::vector<RowFlow>& flows,
                                 double done_s) {
  const auto num_devices = static_cast<int32_t>(ctx.placement.num_devices);
  transport::TrafficBuilder traffic(num_devices);
  const int64_t row_bytes = ctx.config.hidden_size * ctx.activation_bytes;
  for (const RowFlow& f : flows) {
    const auto to = static_cast<int32_t>(dest_site(ctx, kind, block, f.dest).device);
    const auto from = static_cast<int32_t>(source_site(ctx, kind, block, f.source).device);
    traffic.add(from, to, f.rows * row_bytes);
  }
  if (kind == CollectiveKind::kDispatch) {
    ctx.graph().dispatch_rule->add_side_traffic(ctx, kind, block, flows, traffic);
  } else {
    ctx.graph().combine_rule->add_side_traffic(ctx, kind, block, flows, traffic);
  }
  const transport::SparseTraffic bytes = traffic.build();
  const uint64_t order_key = engine::splitmix64_mix((static_cast<uint64_t>(iteration) << 20) ^
                                                    (static_cast<uint64_t>(block) << 1) ^
                                                    (kind == CollectiveKind::kDispatch ? 0u : 1u));
  const transport::AllToAllTiming timing = ctx.channel->all_to_all(bytes, done_s, order_key);
  NetworkDelivery out;
  out.bound_s = timing.bound_s;
  out.end_s = timing.end_s;
  // A destination's batch is complete when every transfer into its device is (one fused
  // all-to-all: under exflow that includes the K/V rows, so the run never beats the bound).
  out.device_done_s.assign(static_cast<size_t>(num_devices), done_s);
  for (size_t i = 0; i < bytes.entries.size(); ++i) {
    double& done = out.device_done_s[static_cast<size_t>(bytes.entries[i].dst)];
    done = std::max(done, timing.entry_done_s[i]);
  }
  return out;
}

caf::behavior collective_behavior(caf::stateful_actor<CollectiveState>* self, RunContextPtr ctx,
                                  CollectiveKind kind, int32_t block, CollectiveReplica replica) {
  const auto num_slots = static_cast<size_t>(ctx->graph().num_slots());
  const size_t num_sources =
      kind == CollectiveKind::kDispatch ? static_cast<size_t>(ctx->num_ranks) : num_slots;
  const size_t num_dests =
      kind == CollectiveKind::kDispatch ? num_slots : static_cast<size_t>(ctx->num_ranks);
  const std::shared_ptr<const CollectiveRule> rule =
      kind == CollectiveKind::kDispatch ? ctx->graph().dispatch_rule : ctx->graph().combine_rule;
  const std::vector<int64_t> source_devices = collective_source_devices(*ctx, kind, block);
  const auto is_local = [local = replica.local_device](int64_t device) {
    return local.empty() ||
           (device >= 0 && static_cast<size_t>(device) < local.size() && local[device] != 0);
  };
  const auto local_sources =
      static_cast<size_t>(std::count_if(source_devices.begin(), source_devices.end(), is_local));
  // One contribution, from a source of this process (`forward`) or from a peer replica.
  auto on_contribution = [=](ContributionPtr c, bool forward) {
    if (!c || c->source < 0 || static_cast<size_t>(c->source) >= num_sources) {
      self->send(ctx->actors.coordinator, failed_atom::value,
                 absl::StrFormat("collective b%d: bad source %d", block, c ? c->source : -1));
      return;
    }
    // Other processes' replicas get the split form (the cluster codec carries parts).
    if (forward && !replica.peers.empty() && c->is_whole()) {
      absl::StatusOr<ContributionPtr> split = split_whole(
          c, num_dests,
          [&](int32_t d) {
            return collective_destination_layer(*ctx, kind, block, static_cast<size_t>(d));
          },
          kind == CollectiveKind::kDispatch ? engine::dataflow::Payload::kExpertInputs
                                            : engine::dataflow::Payload::kExpertOutputs);
      if (!split.ok()) {
        self->send(ctx->actors.coordinator, failed_atom::value,
                   absl::StrFormat("collective b%d: %s", block, split.status().message()));
        return;
      }
      c = std::move(*split);
    }
    // This process's contributions go on to the other processes' replicas, all of an
    // iteration in one message once the last came (the barrier waits for it anyway), before
    // this replica's own work.
    if (forward && !replica.peers.empty()) {
      std::vector<ContributionPtr>& out = self->state.outgoing[c->iteration];
      if (std::any_of(out.begin(), out.end(),
                      [&](const ContributionPtr& o) { return o->source == c->source; })) {
        self->send(ctx->actors.coordinator, failed_atom::value,
                   absl::StrFormat("collective b%d: duplicate source %d", block, c->source));
        return;
      }
      out.push_back(c);
      if (out.size() == local_sources) {
        auto bundle = std::make_shared<ContributionBundle>();
        bundle->contributions = std::move(out);
        self->state.outgoing.erase(c->iteration);
        const ContributionBundlePtr shared = std::move(bundle);
        for (const caf::actor& peer : replica.peers) self->send(peer, contrib_atom::value, shared);
      }
    }
    if (!replica.gathers) return;
    auto& slot = self->state.pending[c->iteration];
    if (slot.empty()) slot.resize(num_sources);
    if (slot[c->source]) {
      self->send(ctx->actors.coordinator, failed_atom::value,
                 absl::StrFormat("collective b%d: duplicate source %d", block, c->source));
      return;
    }
    slot[c->source] = c;
    {
      auto& arrived = self->state.arrived_us[c->iteration];
      if (arrived.empty()) arrived.resize(num_sources, -1.0);
      arrived[c->source] = ctx->seconds_since_start(self->home_system().clock().now()) * 1e6;
    }
    // Sparse iterations: only the iteration's ranks contribute to a dispatch; every expert
    // slot still contributes to a combine, which delivers to those ranks only.
    const std::vector<int32_t>* ranks = nullptr;
    if (ctx->sparse_iterations) {
      const auto found = self->state.ranks.find(c->iteration);
      if (found == self->state.ranks.end()) {
        self->send(ctx->actors.coordinator, failed_atom::value,
                   absl::StrFormat("collective b%d: a contribution to iteration %d came "
                                   "before the iteration's ranks or after it completed",
                                   block, c->iteration));
        return;
      }
      ranks = &found->second;
      if (kind == CollectiveKind::kDispatch &&
          !std::binary_search(ranks->begin(), ranks->end(), c->source)) {
        self->send(ctx->actors.coordinator, failed_atom::value,
                   absl::StrFormat("collective b%d: rank %d contributed to iteration %d, which "
                                   "it takes no part in",
                                   block, c->source, c->iteration));
        return;
      }
    }
    if (ranks != nullptr && kind == CollectiveKind::kDispatch) {
      if (++self->state.num_arrived[c->iteration] < ranks->size()) return;
      if (!self->state.absent) {
        // No source and no iteration: a rule reads an absent rank's parts only (there are none).
        self->state.absent = std::make_shared<Contribution>();
        self->state.absent->iteration = -1;
        self->state.absent->source = -1;
      }
      for (ContributionPtr& p : slot) {
        if (!p) p = self->state.absent;  // a rank with no tokens sends nothing
      }
      self->state.num_arrived.erase(c->iteration);
    } else {
      for (const ContributionPtr& p : slot) {
        if (!p) return;  // barrier not complete yet
      }
    }
    const int64_t width = ctx->executors.front()->activation_width();
    const double done_s = ctx->seconds_since_start(self->home_system().clock().now());
    absl::StatusOr<Delivery> delivery =
        rule->deliver(*ctx, kind, block, slot, num_dests, c->iteration, width);
    if (!delivery.ok()) {
      self->send(ctx->actors.coordinator, failed_atom::value,
                 std::string(delivery.status().message()));
      return;
    }
    // The trace and ExFlow's side traffic walk the flows source by source.
    MUFLOW_ASSERT(std::is_sorted(delivery->flows.begin(), delivery->flows.end(),
                                 [](const RowFlow& a, const RowFlow& b) {
                                   return a.source != b.source ? a.source < b.source
                                                               : a.dest < b.dest;
                                 }),
                  "a collective rule returned row flows out of (source, dest) order");
    std::vector<int64_t> tokens_per_device(ctx->placement.num_devices, 0);
    NetworkDelivery net{{}, 0.0, done_s};
    if (ctx->channel->timed()) {
      net = network_delivery(*ctx, kind, block, c->iteration, delivery->flows, done_s);
    }
    // The barrier's host time beyond the per-run overhead (sim with measured kernels: the
    // collective's concatenation and the delivery of larger batches; 0 elsewhere): every
    // destination gets its batch that much later.
    double host_s = 0.0;
    if (ctx->virtual_time) {
      int64_t barrier_rows = 0;
      for (const RowFlow& f : delivery->flows) barrier_rows += f.rows;
      host_s = ctx->executors.front()->barrier_host_seconds(kind == CollectiveKind::kDispatch,
                                                            barrier_rows);
    }
    double a2a_end_s = done_s;
    // The coordinator hears this barrier's metrics before any destination gets its batch, so
    // they are counted before the iteration it completes (enqueued first, from any thread).
    struct Deferred {
      size_t dest;
      double delay_s;  // > 0: after the network transfer and the host time (sim)
    };
    std::vector<Deferred> deliveries;
    // Destination `d`'s delivery: counted, traced and deferred to when its parts arrived.
    const auto deliver_to = [&](size_t d) {
      const engine::dataflow::TokenBatchPtr& out = delivery->out[d];
      const int64_t rows = out ? out->num_tokens() : 0;
      const StageSite to = dest_site(*ctx, kind, block, d);
      if (kind == CollectiveKind::kDispatch) tokens_per_device[to.device] += rows;
      if (!is_local(to.device)) return;  // another process's replica delivers it
      const double deliver_s =
          net.device_done_s.empty() ? done_s : net.device_done_s[static_cast<size_t>(to.device)];
      a2a_end_s = std::max(a2a_end_s, deliver_s);
      if (deliver_s > done_s) {
        if (ctx->trace && rows > 0) {
          ctx->trace->complete_in(
              "wait",
              absl::StrFormat("wait %s transfer b%d",
                              kind == CollectiveKind::kDispatch ? "dispatch" : "combine", block),
              to.device, kWaitLaneTid, done_s * 1e6, (deliver_s - done_s) * 1e6,
              nlohmann::json{{"block", block}, {"iteration", c->iteration}});
        }
        deliveries.push_back({d, deliver_s - done_s + host_s});
      } else {
        deliveries.push_back({d, host_s});
      }
    };
    if (ranks != nullptr && kind == CollectiveKind::kCombine) {
      // Sparse iterations: only the iteration's ranks get a batch; a row for any other rank
      // would never be merged. The ranks ascend, so deliveries keep destination order.
      for (size_t d = 0; d < num_dests; ++d) {
        const engine::dataflow::TokenBatchPtr& out = delivery->out[d];
        if (out && out->num_tokens() > 0 && is_local(dest_site(*ctx, kind, block, d).device) &&
            !std::binary_search(ranks->begin(), ranks->end(), static_cast<int32_t>(d))) {
          self->send(ctx->actors.coordinator, failed_atom::value,
                     absl::StrFormat("collective b%d: combine rows for rank %zu, which took no "
                                     "part in iteration %d",
                                     block, d, c->iteration));
          return;
        }
      }
      for (const int32_t r : *ranks) {
        if (r >= 0 && static_cast<size_t>(r) < num_dests) deliver_to(static_cast<size_t>(r));
      }
    } else {
      for (size_t d = 0; d < num_dests; ++d) deliver_to(d);
    }
    if (replica.primary) {
      int64_t rows = 0, remote = 0;
      for (const RowFlow& f : delivery->flows) {
        rows += f.rows;
        if (source_site(*ctx, kind, block, f.source).device !=
            dest_site(*ctx, kind, block, f.dest).device) {
          remote += f.rows;
        }
      }
      self->send(ctx->actors.coordinator, rows_atom::value, kind == CollectiveKind::kDispatch,
                 remote, rows);
    }
    a2a_end_s = std::max(a2a_end_s, net.end_s);
    if (replica.primary && a2a_end_s > done_s) {
      self->send(ctx->actors.coordinator, a2a_atom::value, a2a_end_s - done_s, net.bound_s);
    }
    const std::vector<double>& arrived_us = self->state.arrived_us[c->iteration];
    if (replica.primary && kind == CollectiveKind::kDispatch) {
      self->send(ctx->actors.coordinator, load_atom::value, static_cast<int64_t>(block),
                 c->iteration, std::move(tokens_per_device), done_s, delivery->tokens_rebalanced);
    } else if (replica.primary) {
      // When each device's last expert stage finished this layer (HarMoEny's idle time).
      std::vector<double> finish_s(ctx->placement.num_devices, -1.0);
      for (size_t src = 0; src < slot.size(); ++src) {
        const int64_t dev = source_site(*ctx, kind, block, src).device;
        finish_s[dev] = std::max(finish_s[dev], arrived_us[src] * 1e-6);
      }
      self->send(ctx->actors.coordinator, layer_atom::value, static_cast<int64_t>(block),
                 c->iteration, done_s, std::move(finish_s));
    }
    for (const Deferred& dv : deliveries) {
      engine::dataflow::TokenBatchPtr& out = delivery->out[dv.dest];
      if (!out) out = empty_delivery(*ctx, kind, block, dv.dest, c->iteration, width);
      const caf::actor dest = destination(*ctx, kind, block, dv.dest);
      if (dv.delay_s > 0) {
        self->delayed_send(dest, std::chrono::nanoseconds(std::llround(dv.delay_s * 1e9)),
                           batch_atom::value, std::move(out));
      } else {
        self->send(dest, batch_atom::value, std::move(out));
      }
    }
    if (ctx->trace && replica.primary) {
      const double done_us = ctx->seconds_since_start(self->home_system().clock().now()) * 1e6;
      ctx->trace->instant(
          kind == CollectiveKind::kDispatch ? "dispatch all-to-all" : "combine all-to-all", 0, 0,
          done_us, engine::trace::InstantScope::kGlobal,
          nlohmann::json{{"block", block}, {"iteration", c->iteration}});
      trace_barrier(*ctx, kind, block, c->iteration, slot.size(), delivery->flows, arrived_us,
                    done_us);
    }
    self->state.arrived_us.erase(c->iteration);
    self->state.pending.erase(c->iteration);
    self->state.ranks.erase(c->iteration);
  };
  return {
      [=](ranks_atom, int64_t iteration, const std::vector<int32_t>& ranks) {
        self->state.ranks[iteration] = ranks;
      },
      [=](contrib_atom, const ContributionPtr& c) {
        on_contribution(c, c && c->source >= 0 &&
                               static_cast<size_t>(c->source) < source_devices.size() &&
                               is_local(source_devices[c->source]));
      },
      [=](contrib_atom, const ContributionBundlePtr& b) {
        if (!b) return;
        for (const ContributionPtr& c : b->contributions) on_contribution(c, false);
      },
  };
}

}  // namespace

engine::dataflow::LayerId collective_destination_layer(const RunContext& ctx, CollectiveKind kind,
                                                       int32_t block, size_t slot) {
  const auto d = static_cast<int32_t>(slot);
  if (kind == CollectiveKind::kDispatch) return {engine::dataflow::StageKind::kExpert, block, d};
  const auto num_layers = static_cast<int32_t>(ctx.config.num_layers);
  if (block + 1 < num_layers) return {engine::dataflow::StageKind::kAttention, block + 1, d};
  return {engine::dataflow::StageKind::kSampler, num_layers, d};
}

std::shared_ptr<const CollectiveRule> concat_rule() {
  static const auto rule = std::make_shared<const ConcatRule>();
  return rule;
}

std::vector<int64_t> collective_source_devices(const RunContext& ctx, CollectiveKind kind,
                                               int32_t block) {
  const size_t n = kind == CollectiveKind::kDispatch ? static_cast<size_t>(ctx.num_ranks)
                                                     : static_cast<size_t>(ctx.graph().num_slots());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = source_site(ctx, kind, block, i).device;
  return out;
}

std::vector<int64_t> collective_dest_devices(const RunContext& ctx, CollectiveKind kind,
                                             int32_t block) {
  const size_t n = kind == CollectiveKind::kDispatch ? static_cast<size_t>(ctx.graph().num_slots())
                                                     : static_cast<size_t>(ctx.num_ranks);
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = dest_site(ctx, kind, block, i).device;
  return out;
}

caf::actor spawn_collective(caf::actor_system& sys, RunContextPtr ctx, CollectiveKind kind,
                            int32_t block, CollectiveReplica replica) {
  return sys.spawn(collective_behavior, std::move(ctx), kind, block, std::move(replica));
}

}  // namespace muflow::actors
