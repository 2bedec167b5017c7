#include "actors/wirings/moeshard.hpp"

#include "absl/strings/str_format.h"
#include "actors/collective.hpp"
#include "actors/wirings/common.hpp"
#include "engine/dataflow/expert_dispatch.hpp"

namespace muflow::actors {
namespace {

// Every row to every device.
class AllGatherDispatch final : public CollectiveRule {
 public:
  absl::StatusOr<Delivery> deliver(const RunContext& ctx, CollectiveKind kind, int32_t block,
                                   const std::vector<ContributionPtr>& slot, size_t num_dests,
                                   int64_t iteration, int64_t width) const override {
    const engine::dataflow::DispatchParts parts = dispatch_parts(slot, ctx.config.num_experts);
    Delivery d;
    std::vector<std::vector<int64_t>> rows_from;
    auto out = engine::dataflow::dispatch_all_gather(parts, static_cast<int64_t>(num_dests), block,
                                                     iteration, width, &rows_from);
    d.flows = row_flows(rows_from);
    if (!out.ok()) return out.status();
    d.out = std::move(*out);
    return d;
  }
};

// Each rank receives the sum of the shards' partial outputs, in shard order.
class ReduceScatterCombine final : public CollectiveRule {
 public:
  absl::StatusOr<Delivery> deliver(const RunContext& ctx, CollectiveKind kind, int32_t block,
                                   const std::vector<ContributionPtr>& slot, size_t num_dests,
                                   int64_t iteration, int64_t width) const override {
    Delivery d;
    std::vector<std::vector<int64_t>> rows_from;  // [dst][src]
    for (size_t dst = 0; dst < num_dests; ++dst) {
      std::vector<engine::dataflow::TokenBatchPtr> partials;
      std::vector<int64_t> from(slot.size(), 0);
      for (size_t src = 0; src < slot.size(); ++src) {
        partials.push_back(slot[src]->part(static_cast<int32_t>(dst)));
        if (partials.back()) from[src] = partials.back()->num_tokens();
      }
      auto sum = engine::dataflow::reduce_partials(partials);
      if (!sum.ok()) {
        return absl::InternalError(
            absl::StrFormat("combine b%d: %s", block, sum.status().message()));
      }
      engine::dataflow::TokenBatchPtr out = *sum;
      if (!out) {
        out = std::make_shared<engine::dataflow::TokenBatch>();
        out->act = std::make_shared<engine::dataflow::Activations>(0, width);
      }
      out->layer = collective_destination_layer(ctx, kind, block, dst);
      out->payload = engine::dataflow::Payload::kExpertOutputs;
      out->iteration = iteration;
      d.out.push_back(std::move(out));
      rows_from.push_back(std::move(from));
    }
    d.flows = row_flows(rows_from);
    return d;
  }
};

// This device's shard of each segment's expert.
class ShardKernel final : public ExpertKernel {
 public:
  ShardKernel(engine::exec::Executor* exec, int32_t block, int32_t shard, int64_t num_shards)
      : exec_(exec), block_(block), shard_(shard), num_shards_(num_shards) {}

  double compute(const engine::dataflow::TokenBatch& in, float* y,
                 std::vector<Send>& out) override {
    const int64_t H = exec_->activation_width();
    const float* x = H > 0 ? in.act->data.data() : nullptr;
    double total = 0.0;
    for (const engine::dataflow::ExpertSegment& seg : in.segments) {
      const int64_t rows = seg.end - seg.begin;
      double s = 0.0;
      exec_->expert_shard(block_, seg.expert, shard_, num_shards_, x ? x + seg.begin * H : nullptr,
                          rows, H > 0 ? y + seg.begin * H : nullptr, &s);
      total += s;
    }
    return total;
  }
  std::string name() const override { return absl::StrFormat("shards b%d d%d", block_, shard_); }

 private:
  engine::exec::Executor* exec_;
  int32_t block_, shard_;
  int64_t num_shards_;
};

class ShardRun final : public WiringRun {
 public:
  explicit ShardRun(WiringGraph graph) { graph_ = std::move(graph); }
  std::unique_ptr<ExpertKernel> expert_kernel(const RunContextPtr& ctx,
                                              engine::exec::Executor* exec, int32_t block,
                                              int32_t slot) const override {
    return std::make_unique<ShardKernel>(exec, block, slot, graph_.num_slots());
  }
};

class PreparedMoeShard final : public PreparedWiring {
 public:
  explicit PreparedMoeShard(std::shared_ptr<const engine::exec::CpuExpertShards> shards)
      : shards_(std::move(shards)) {}
  std::shared_ptr<const engine::exec::CpuExpertShards> cpu_shards() const override {
    return shards_;
  }
  absl::StatusOr<std::shared_ptr<const WiringRun>> start_run(const RunContext& ctx) const override {
    WiringGraph g = barrier_graph(ctx);
    g.slot_device = per_device_slots(ctx);
    g.dispatch_rule = std::make_shared<const AllGatherDispatch>();
    g.combine_rule = std::make_shared<const ReduceScatterCombine>();
    return std::make_shared<const ShardRun>(std::move(g));
  }

 private:
  std::shared_ptr<const engine::exec::CpuExpertShards> shards_;  // cpu: one shard per device
};

class MoeShardWiring final : public Wiring {
 public:
  std::string_view name() const override { return "moeshard"; }
  WiringTraits traits() const override {
    return {.disaggregated_attention = false,
            .per_block_placement = false,
            .capability_placement = false};
  }
  absl::StatusOr<std::shared_ptr<const PreparedWiring>> prepare(
      const WiringSetup& s) const override {
    std::shared_ptr<const engine::exec::CpuExpertShards> shards;
    if (s.weights) {
      absl::StatusOr<std::shared_ptr<const engine::exec::CpuExpertShards>> prepared =
          engine::exec::CpuExpertShards::prepare(
              *s.weights, static_cast<int64_t>(s.topology.devices.size()),
              kernels::cpu::parse_bf16_compute(s.topology.model.compute)
                  .value_or(kernels::cpu::Bf16Compute::kAuto));
      if (!prepared.ok()) return prepared.status();
      shards = *prepared;
    }
    return std::make_shared<const PreparedMoeShard>(std::move(shards));
  }
};

}  // namespace

const Wiring& moeshard_wiring() {
  static const MoeShardWiring wiring;
  return wiring;
}

}  // namespace muflow::actors
