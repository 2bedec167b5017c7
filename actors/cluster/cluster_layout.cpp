#include "actors/cluster/cluster_layout.hpp"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "actors/collective.hpp"
#include "actors/messages.hpp"

namespace muflow::actors::cluster {

std::vector<uint32_t> device_processes(const engine::topology::Topology& topology) {
  std::vector<uint32_t> out(topology.devices.size(), 0);
  for (size_t w = 0; w < topology.workers.size(); ++w) {
    for (int64_t d : topology.workers[w].devices) {
      if (d >= 0 && static_cast<size_t>(d) < out.size()) {
        out[static_cast<size_t>(d)] = static_cast<uint32_t>(w + 1);
      }
    }
  }
  return out;
}

std::vector<uint32_t> replace_lost_devices(std::vector<uint32_t> device_process,
                                           const std::set<uint32_t>& lost, uint32_t num_processes) {
  std::vector<int64_t> load(num_processes, 0);  // devices per surviving worker
  for (uint32_t p : device_process) {
    if (p < num_processes && lost.count(p) == 0) ++load[p];
  }
  for (uint32_t& p : device_process) {
    if (lost.count(p) == 0) continue;
    uint32_t best = 0;  // the driver, when no worker survives
    for (uint32_t q = 1; q < num_processes; ++q) {
      if (lost.count(q) == 0 && (best == 0 || load[q] < load[best])) best = q;
    }
    p = best;
    if (best != 0) ++load[best];
  }
  return device_process;
}

std::string format_device_processes(const std::vector<uint32_t>& device_process) {
  return absl::StrJoin(device_process, ",");
}

absl::StatusOr<std::vector<uint32_t>> parse_device_processes(const std::string& text,
                                                             size_t num_devices,
                                                             uint32_t num_processes) {
  std::vector<uint32_t> out;
  out.reserve(num_devices);
  for (absl::string_view field : absl::StrSplit(text, ',')) {
    if (out.size() == num_devices) {
      return absl::InvalidArgumentError(
          absl::StrFormat("device map \"%s\": more than %d entries", text, num_devices));
    }
    uint32_t p = 0;
    if (!absl::SimpleAtoi(field, &p) || p >= num_processes) {
      return absl::InvalidArgumentError(
          absl::StrFormat("device map entry %d (\"%s\"): expected a process index below %d",
                          out.size(), field, num_processes));
    }
    out.push_back(p);
  }
  if (out.size() != num_devices) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device map \"%s\": %d entries for %d devices", text, out.size(), num_devices));
  }
  return out;
}

ActorMessageLimits limits_for(const engine::model::ModelConfig& config,
                              const engine::topology::Topology& topology) {
  ActorMessageLimits l;
  // A batch never holds more rows than one iteration admits on every rank (prefill chunk,
  // decode tokens, batch tokens) times top-k (an all-gather hands a device every row), with
  // margin: generous, but bounded by the topology, never by the wire.
  const auto& sc = topology.scheduler;
  const int64_t per_rank = std::max<int64_t>(1, sc.max_prefill_tokens) +
                           std::max<int64_t>(1, sc.max_batch_requests) +
                           std::max<int64_t>(1, sc.max_batch_tokens);
  const int64_t ranks = std::max<int64_t>(1, static_cast<int64_t>(topology.devices.size()));
  const int64_t rows = std::min<int64_t>(
      int64_t{1} << 24, 2 * per_rank * ranks * std::max<int64_t>(1, config.num_topk) + 4096);
  l.batch.max_tokens = rows;
  // Rows are the hidden state, or (shared-expert models) the residual and the shared expert's
  // output side by side (engine/dataflow/token_pool.cpp).
  l.batch.max_width = 2 * std::max<int64_t>(1, config.hidden_size);
  l.batch.max_segments = std::max<int64_t>(1, config.num_experts);
  l.batch.max_payload_bytes = rows * l.batch.max_width * 4;
  l.max_parts =
      std::max<int64_t>(1, config.num_experts + static_cast<int64_t>(topology.devices.size()));
  l.max_rows = rows;
  l.max_logits = std::max<int64_t>(1, config.vocab_size);
  l.max_kv_width = std::max<int64_t>(1, config.num_kv_heads * config.head_dim);
  l.max_devices = std::max<int64_t>(1, static_cast<int64_t>(topology.devices.size()));
  return l;
}

caf::actor ClusterLayout::remote_in(const ActorAddress& address, uint32_t process) {
  caf::actor a = make_remote_actor(sys_, outbox_, process, address);
  remotes_.emplace_back(process, a);
  return a;
}

namespace {

bool in_range(int32_t i, size_t n) { return i >= 0 && static_cast<size_t>(i) < n; }

// True when `layout`'s process runs a replica of the collective at `a` that gathers: it hosts
// one of the collective's destinations, or DP rank 0 (graph_builder.hpp, place_collective).
bool hosts_collective(const RunContext& ctx, const ClusterLayout& layout, const ActorAddress& a) {
  const bool dispatch = a.role == ActorRole::kDispatch;
  if (a.index != 0 ||
      !in_range(a.block, dispatch ? ctx.actors.dispatch.size() : ctx.actors.combine.size())) {
    return false;
  }
  if (!ctx.placement.rank_device.empty() &&
      layout.hosts_device(ctx.placement.rank_device.front())) {
    return true;
  }
  const std::vector<int64_t> dests = collective_dest_devices(
      ctx, dispatch ? CollectiveKind::kDispatch : CollectiveKind::kCombine, a.block);
  return std::any_of(dests.begin(), dests.end(), [&](int64_t d) { return layout.hosts_device(d); });
}

// The device an address's actor runs on (-1: the driver's coordinator; -3: a collective), or
// -2 when the address is outside the run.
int64_t device_of(const RunContext& ctx, const ActorAddress& a) {
  auto in = in_range;
  const SiteTable& s = ctx.sites;
  switch (a.role) {
    case ActorRole::kCoordinator:
      return -1;
    case ActorRole::kDispatch:
    case ActorRole::kCombine:
      return -3;
    case ActorRole::kAttention:
      return in(a.block, s.attention.size()) && in(a.index, s.attention[a.block].size())
                 ? s.attention[a.block][a.index].device
                 : -2;
    case ActorRole::kExpert:
      return in(a.block, s.experts.size()) && in(a.index, s.experts[a.block].size())
                 ? s.experts[a.block][a.index].device
                 : -2;
    case ActorRole::kSampler:
      return in(a.index, s.samplers.size()) ? s.samplers[a.index].device : -2;
    case ActorRole::kDevice:
      return in(a.index, ctx.actors.devices.size()) ? a.index : -2;
  }
  return -2;
}

// A metrics report for the coordinator is checked against the run before it reaches the
// MetricsRecorder, whose asserts (device index, one entry per device) a peer must not be able
// to trip, and which sizes tables by block.
absl::Status check_report(const RunContext& ctx, const caf::message& m) {
  const int64_t devices = ctx.placement.num_devices;
  const int64_t layers = ctx.config.num_layers;
  auto finite = [](double x) { return std::isfinite(x); };
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError("a report for the coordinator with " + what);
  };
  auto check_layer = [&](int64_t block, int64_t iteration, size_t entries) -> absl::Status {
    if (block < 0 || block >= layers) {
      return bad(absl::StrFormat("block %d (the model has %d)", block, layers));
    }
    if (iteration < 0) return bad(absl::StrFormat("iteration %d", iteration));
    if (static_cast<int64_t>(entries) != devices) {
      return bad(
          absl::StrFormat("%d per-device entries (the run has %d devices)", entries, devices));
    }
    return absl::OkStatus();
  };
  if (m.match_elements<busy_atom, int64_t, double, double>()) {
    const int64_t device = m.get_as<int64_t>(1);
    const double begin = m.get_as<double>(2), end = m.get_as<double>(3);
    if (device < 0 || device >= devices) {
      return bad(absl::StrFormat("device %d (the run has %d)", device, devices));
    }
    if (!finite(begin) || !finite(end) || end < begin) {
      return bad(absl::StrFormat("a busy interval [%g, %g]", begin, end));
    }
  } else if (m.match_elements<load_atom, int64_t, int64_t, std::vector<int64_t>, double,
                              int64_t>()) {
    const auto& tokens = m.get_as<std::vector<int64_t>>(3);
    if (absl::Status s = check_layer(m.get_as<int64_t>(1), m.get_as<int64_t>(2), tokens.size());
        !s.ok()) {
      return s;
    }
    if (std::any_of(tokens.begin(), tokens.end(), [](int64_t t) { return t < 0; }) ||
        m.get_as<int64_t>(5) < 0 || !finite(m.get_as<double>(4))) {
      return bad("a negative token count or a time that is not finite");
    }
  } else if (m.match_elements<layer_atom, int64_t, int64_t, double, std::vector<double>>()) {
    const auto& finish = m.get_as<std::vector<double>>(4);
    if (absl::Status s = check_layer(m.get_as<int64_t>(1), m.get_as<int64_t>(2), finish.size());
        !s.ok()) {
      return s;
    }
    if (!finite(m.get_as<double>(3)) || !std::all_of(finish.begin(), finish.end(), finite)) {
      return bad("a time that is not finite");
    }
  } else if (m.match_elements<rows_atom, bool, int64_t, int64_t>()) {
    const int64_t remote = m.get_as<int64_t>(2), rows = m.get_as<int64_t>(3);
    if (remote < 0 || rows < remote) {
      return bad(absl::StrFormat("%d remote rows of %d", remote, rows));
    }
  } else if (m.match_elements<fetch_atom, int64_t, int64_t, double>()) {
    const double stall = m.get_as<double>(3);
    if (m.get_as<int64_t>(1) < 0 || m.get_as<int64_t>(2) < 0 || !finite(stall) || stall < 0) {
      return bad("negative expert fetches or stall time");
    }
  }
  return absl::OkStatus();
}

// A row's DP rank picks the part its outputs go to and the merge point it returns to; the
// stages index their tables with it (and abort on one out of range), so a peer's is checked.
absl::Status check_ranks(const RunContext& ctx, const ActorAddress& to,
                         const engine::dataflow::TokenBatch& batch) {
  for (const engine::dataflow::TokenMeta& t : batch.tokens) {
    if (t.origin_rank < 0 || t.origin_rank >= ctx.num_ranks) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "a token batch for %s with a row of request %d for DP rank %d; the run has %d",
          to_string(to), t.request_id, t.origin_rank, ctx.num_ranks));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FrameDelivery> deliver_actor_frame(const RunContext& ctx,
                                                  const ClusterLayout& layout,
                                                  const transport::cluster::FrameView& frame,
                                                  const ActorMessageLimits& limits) {
  if (frame.prefix.run != layout.run()) return FrameDelivery::kOtherRun;
  absl::StatusOr<DecodedMessage> m = decode_actor_message(frame.header, frame.payload, limits);
  if (!m.ok()) return m.status();
  const int64_t device = device_of(ctx, m->to);
  const bool here = device == -1   ? layout.hosts_driver()
                    : device == -3 ? hosts_collective(ctx, layout, m->to)
                                   : device >= 0 && layout.hosts_device(device);
  if (!here) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a message for %s, which process %d does not host", to_string(m->to), layout.self()));
  }
  if (m->message.match_elements<batch_atom, engine::dataflow::TokenBatchPtr>()) {
    const auto& batch = m->message.get_as<engine::dataflow::TokenBatchPtr>(1);
    const int64_t h = ctx.config.hidden_size;
    if (batch->act && batch->act->width != h && batch->act->width != 2 * h) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "a token batch for %s with rows of %d values; the model's rows have %d (or %d with "
          "a shared expert's output)",
          to_string(m->to), batch->act->width, h, 2 * h));
    }
    if (absl::Status s = check_ranks(ctx, m->to, *batch); !s.ok()) return s;
  }
  // Contributions carry rows too (a collective replica's parts from another process).
  std::vector<ContributionPtr> contributions;
  if (m->message.match_elements<contrib_atom, ContributionPtr>()) {
    contributions.push_back(m->message.get_as<ContributionPtr>(1));
  } else if (m->message.match_elements<contrib_atom, ContributionBundlePtr>()) {
    if (const ContributionBundlePtr& b = m->message.get_as<ContributionBundlePtr>(1)) {
      contributions = b->contributions;
    }
  }
  for (const ContributionPtr& c : contributions) {
    if (!c) continue;
    for (const engine::dataflow::TokenBatchPtr& part : c->parts) {
      if (!part) continue;
      if (absl::Status s = check_ranks(ctx, m->to, *part); !s.ok()) return s;
    }
  }
  // A bundle of reports (an Outbox's batch) is checked whole, then delivered one by one.
  std::vector<caf::message> messages;
  if (m->message.match_elements<reports_atom, std::vector<caf::message>>()) {
    messages = m->message.get_as<std::vector<caf::message>>(1);
  } else {
    messages.push_back(std::move(m->message));
  }
  if (m->to.role == ActorRole::kCoordinator) {
    for (const caf::message& message : messages) {
      if (absl::Status s = check_report(ctx, message); !s.ok()) return s;
    }
  }
  caf::actor dest = resolve(ctx.actors, m->to);
  if (!dest) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a message for %s, which this run does not have", to_string(m->to)));
  }
  for (caf::message& message : messages) caf::anon_send(dest, std::move(message));
  return FrameDelivery::kDelivered;
}

}  // namespace muflow::actors::cluster

namespace muflow::actors::cluster {

void fail_run(const RunContext& ctx, const ClusterLayout& layout, Outbox* outbox,
              const std::string& what) {
  caf::message m = caf::make_message(failed_atom::value, what);
  if (layout.hosts_driver()) {
    if (ctx.actors.coordinator) caf::anon_send(ctx.actors.coordinator, std::move(m));
    return;
  }
  if (outbox != nullptr) (void)outbox->send(0, {ActorRole::kCoordinator, 0, 0}, m.content());
}

}  // namespace muflow::actors::cluster
