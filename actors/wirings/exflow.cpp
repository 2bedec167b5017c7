#include "actors/wirings/exflow.hpp"

#include <map>

#include "actors/wirings/common.hpp"

namespace muflow::actors {
namespace {

// A request with one token in the batch continues on the rank of its top-1 expert's device.
class TopOneContinuation final : public ContinuationRule {
 public:
  explicit TopOneContinuation(std::vector<int64_t> rank_of_device)
      : rank_of_device_(std::move(rank_of_device)) {}

  std::vector<int32_t> next_ranks(const RunContext& ctx, int32_t block, int32_t rank,
                                  const std::vector<engine::dataflow::TokenMeta>& meta,
                                  const std::vector<int32_t>& ids) const override {
    std::vector<int32_t> next(meta.size(), rank);
    std::map<int64_t, int64_t> tokens_of;
    for (const engine::dataflow::TokenMeta& m : meta) ++tokens_of[m.request_id];
    const int64_t K = ctx.config.num_topk;
    for (size_t i = 0; i < meta.size(); ++i) {
      if (tokens_of[meta[i].request_id] != 1) continue;
      const int64_t device = ctx.placement.device_of(block, ids[i * K]);
      const int64_t r = rank_of_device_[device];
      if (r >= 0) next[i] = static_cast<int32_t>(r);
    }
    return next;
  }

 private:
  std::vector<int64_t> rank_of_device_;  // [num_devices] DP rank on each device (-1: none)
};

// Sync's dispatch plus the KV coherence traffic: each rank's new K/V rows of this block (one
// per token it just ran attention for) go to every other device with the dispatch.
class CoherentDispatch final : public CollectiveRule {
 public:
  absl::StatusOr<Delivery> deliver(const RunContext& ctx, CollectiveKind kind, int32_t block,
                                   const std::vector<ContributionPtr>& parts, size_t num_dests,
                                   int64_t iteration, int64_t width) const override {
    return concat_rule()->deliver(ctx, kind, block, parts, num_dests, iteration, width);
  }
  bool takes_whole_rows() const override { return concat_rule()->takes_whole_rows(); }
  void add_side_traffic(const RunContext& ctx, CollectiveKind kind, int32_t block,
                        const std::vector<RowFlow>& flows,
                        transport::TrafficBuilder& traffic) const override {
    const int64_t k = ctx.config.num_topk;
    const int64_t kv_row_bytes =
        2 * ctx.config.num_kv_heads * ctx.config.head_dim * ctx.activation_bytes;
    const auto num_devices = static_cast<int32_t>(ctx.placement.num_devices);
    // Flows are sorted by source: one K/V all-gather per source rank that sent rows.
    for (size_t f = 0; f < flows.size();) {
      const int32_t src = flows[f].source;
      int64_t rows = 0;
      for (; f < flows.size() && flows[f].source == src; ++f) rows += flows[f].rows;
      const auto from = static_cast<int32_t>(ctx.sites.attention[block][src].device);
      for (int32_t to = 0; to < num_devices; ++to) traffic.add(from, to, rows / k * kv_row_bytes);
    }
  }
};

class ExflowWiring final : public Wiring {
 public:
  std::string_view name() const override { return "exflow"; }
  WiringTraits traits() const override {
    return {.disaggregated_attention = false,
            .per_block_placement = true,
            .capability_placement = true};
  }
  absl::StatusOr<std::shared_ptr<const PreparedWiring>> prepare(const WiringSetup&) const override {
    return graph_wiring([](const RunContext& ctx) {
      WiringGraph g = barrier_graph(ctx);
      g.slot_device = per_expert_slots(ctx);
      const auto R = static_cast<int32_t>(ctx.num_ranks);
      std::vector<int32_t> all;
      for (int32_t r = 0; r < R; ++r) all.push_back(r);
      g.residual_targets.assign(R, all);  // every rank's pool waits for every rank
      std::vector<int64_t> rank_of_device(ctx.placement.num_devices, -1);
      for (int32_t r = 0; r < R; ++r) rank_of_device[ctx.placement.rank_device[r]] = r;
      g.continuation = std::make_shared<const TopOneContinuation>(std::move(rank_of_device));
      g.dispatch_rule = std::make_shared<const CoherentDispatch>();
      g.kv_replicated = true;  // each rank's own copy, kept equal by messages
      return g;
    });
  }
};

}  // namespace

const Wiring& exflow_wiring() {
  static const ExflowWiring wiring;
  return wiring;
}

}  // namespace muflow::actors
