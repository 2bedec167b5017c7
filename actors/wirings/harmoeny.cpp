#include "actors/wirings/harmoeny.hpp"

#include <chrono>
#include <future>
#include <map>

#include "absl/strings/str_format.h"
#include "actors/wirings/common.hpp"
#include "actors/wirings/harmoeny_params.hpp"
#include "engine/dataflow/expert_dispatch.hpp"
#include "engine/exec/cpu_expert_slots.hpp"
#include "engine/planning/harmoeny_rebalance.hpp"
#include "engine/planning/harmoeny_slots.hpp"

namespace muflow::actors {
namespace {

// HarMoEny Algorithm 1: every rank knows the [ranks, experts] counts (the metadata all-gather
// is this barrier) and derives the same schedule; rows move to the devices it names.
class RebalancedDispatch final : public CollectiveRule {
 public:
  explicit RebalancedDispatch(HarmoenyParams params) : p_(std::move(params)) {}

  absl::StatusOr<Delivery> deliver(const RunContext& ctx, CollectiveKind kind, int32_t block,
                                   const std::vector<ContributionPtr>& slot, size_t num_dests,
                                   int64_t iteration, int64_t width) const override {
    const engine::dataflow::DispatchParts parts = dispatch_parts(slot, ctx.config.num_experts);
    auto counts = engine::dataflow::dispatch_counts(parts);
    if (!counts.ok()) return counts.status();
    auto rebalanced =
        p_.paper
            ? engine::planning::harmoeny_rebalance_paper(*counts, ctx.placement.expert_device, p_.q)
            : engine::planning::harmoeny_rebalance_code(*counts, ctx.placement.expert_device, p_.q);
    if (!rebalanced.ok()) return rebalanced.status();
    Delivery d;
    std::vector<std::vector<int64_t>> rows_from;
    auto out = engine::dataflow::dispatch_by_schedule(parts, rebalanced->schedule, block, iteration,
                                                      width, &rows_from);
    d.flows = row_flows(rows_from);
    if (!out.ok()) return out.status();
    d.out = std::move(*out);
    d.tokens_rebalanced = rebalanced->tokens_moved;
    return d;
  }

 private:
  HarmoenyParams p_;
};

// The experts of one device's batch: every segment's expert, local or from a slot.
class SlotCacheKernel final : public ExpertKernel {
 public:
  SlotCacheKernel(RunContextPtr ctx, engine::exec::Executor* exec, int32_t block, int32_t device,
                  const HarmoenyParams* params, std::shared_ptr<engine::exec::CpuExpertSlots> slots)
      : ctx_(std::move(ctx)),
        exec_(exec),
        block_(block),
        device_(device),
        num_home_(static_cast<int64_t>(ctx_->placement.experts_on(device).size())),
        p_(*params),
        slots_(std::move(slots)) {}

  std::string name() const override { return absl::StrFormat("experts b%d d%d", block_, device_); }

  double compute(const engine::dataflow::TokenBatch& in, float* y,
                 std::vector<Send>& out) override {
    const int64_t H = exec_->activation_width();
    const float* x = H > 0 ? in.act->data.data() : nullptr;
    if (slots_) {
      compute_with_slot_copies(in, x, y, out);
      return 0.0;  // measured, not modeled
    }
    // sim: modeled time of the slot cache's timeline.
    std::vector<engine::planning::SlotWork> work;
    double total = 0.0;
    for (const engine::dataflow::ExpertSegment& seg : in.segments) {
      const int64_t rows = seg.end - seg.begin;
      const float* xs = x ? x + seg.begin * H : nullptr;
      float* ys = H > 0 ? y + seg.begin * H : nullptr;
      double s = 0.0;
      exec_->expert(block_, seg.expert, xs, rows, ys, &s);
      work.push_back({seg.expert, rows, ctx_->placement.expert_device[seg.expert] == device_, s});
      total += s;
    }
    absl::StatusOr<engine::planning::SlotTimeline> t = engine::planning::plan_slot_timeline(
        std::move(work), num_home_, p_.slots, p_.copy_s[device_], p_.prefetch);
    if (!t.ok()) {
      out.push_back({ctx_->actors.coordinator,
                     caf::make_message(failed_atom::value,
                                       name() + ": " + std::string(t.status().message()))});
      return total;
    }
    if (t->fetches > 0) {
      out.push_back({ctx_->actors.coordinator,
                     caf::make_message(fetch_atom::value, t->fetches, t->restores, t->stall_s)});
    }
    return t->makespan_s;
  }

 private:
  // cpu: the slot plan's run order, foreign experts computed from weights the device's copy
  // worker brought into their slots (engine/exec/cpu_expert_slots.hpp). With prefetch every copy is
  // queued up front (each after the compute that last used its slot), so copies overlap the
  // experts computing before them; without, a copy is asked for when the compute reaches its
  // expert. Reports the copies made and the wall time waited.
  void compute_with_slot_copies(const engine::dataflow::TokenBatch& in, const float* x, float* y,
                                std::vector<Send>& out) {
    const int64_t H = exec_->activation_width();
    engine::exec::CpuExpertSlots& slots = *slots_;
    std::map<int32_t, const engine::dataflow::ExpertSegment*> segment_of;
    std::vector<engine::planning::SlotWork> work;
    for (const engine::dataflow::ExpertSegment& seg : in.segments) {
      segment_of[seg.expert] = &seg;
      // Row counts stand in for compute times, so the plan hands each foreign expert the
      // slot that frees first (as on sim), not always the same one.
      const int64_t rows = seg.end - seg.begin;
      work.push_back({seg.expert, rows, ctx_->placement.expert_device[seg.expert] == device_,
                      static_cast<double>(rows)});
    }
    absl::StatusOr<engine::planning::SlotTimeline> t = engine::planning::plan_slot_timeline(
        std::move(work), num_home_, p_.slots, 0.0, p_.prefetch);
    if (!t.ok()) {
      out.push_back({ctx_->actors.coordinator,
                     caf::make_message(failed_atom::value,
                                       name() + ": " + std::string(t.status().message()))});
      return;
    }
    const size_t n = t->order.size();
    std::vector<std::promise<void>> computed(n);
    std::vector<std::shared_future<void>> computed_event(n), copied(n);
    for (size_t i = 0; i < n; ++i) computed_event[i] = computed[i].get_future().share();
    auto fetch = [&](size_t i) {
      const int32_t prev = t->slot_prev[i];
      copied[i] = slots.fetch(t->slot[i], block_, t->order[i],
                              prev >= 0 ? computed_event[prev] : std::shared_future<void>{});
    };
    const int64_t copies_before = slots.copies();
    if (p_.prefetch) {
      for (size_t i = 0; i < n; ++i) {
        if (t->slot[i] >= 0) fetch(i);
      }
    }
    double stall_s = 0.0;
    // Every `computed` promise is set on every path: queued copies wait on them.
    for (size_t i = 0; i < n; ++i) {
      const engine::dataflow::ExpertSegment& seg = *segment_of.at(t->order[i]);
      const int64_t rows = seg.end - seg.begin;
      if (t->slot[i] >= 0) {
        if (!p_.prefetch) fetch(i);
        const auto wait_from = std::chrono::steady_clock::now();
        copied[i].wait();
        stall_s +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_from).count();
        slots.forward(t->slot[i], block_, seg.expert, x + seg.begin * H, rows, y + seg.begin * H);
      } else {
        double unused = 0.0;
        exec_->expert(block_, seg.expert, x + seg.begin * H, rows, y + seg.begin * H, &unused);
      }
      computed[i].set_value();
    }
    const int64_t copies = slots.copies() - copies_before;
    if (copies > 0) {
      out.push_back({ctx_->actors.coordinator,
                     caf::make_message(fetch_atom::value, copies, t->restores, stall_s)});
    }
  }

  RunContextPtr ctx_;
  engine::exec::Executor* exec_;
  int32_t block_, device_;
  int64_t num_home_;         // experts placed on device_ (the slot cache's resident ones)
  const HarmoenyParams& p_;  // owned by the HarmoenyRun that made this kernel
  std::shared_ptr<engine::exec::CpuExpertSlots> slots_;  // cpu: the device's slots; sim: null
};

// One run: the graph, the resolved parameters and (cpu) each device's expert slots.
class HarmoenyRun final : public WiringRun {
 public:
  HarmoenyRun(WiringGraph graph, HarmoenyParams params,
              std::vector<std::shared_ptr<engine::exec::CpuExpertSlots>> slots)
      : params_(std::move(params)), slots_(std::move(slots)) {
    graph_ = std::move(graph);
  }
  std::unique_ptr<ExpertKernel> expert_kernel(const RunContextPtr& ctx,
                                              engine::exec::Executor* exec, int32_t block,
                                              int32_t slot) const override {
    const int64_t device = graph_.slot_device[block][slot];
    return std::make_unique<SlotCacheKernel>(ctx, exec, block, static_cast<int32_t>(device),
                                             &params_,
                                             slots_.empty() ? nullptr : slots_.at(device));
  }

 private:
  HarmoenyParams params_;
  std::vector<std::shared_ptr<engine::exec::CpuExpertSlots>> slots_;  // [num_devices]; sim: empty
};

class PreparedHarmoeny final : public PreparedWiring {
 public:
  explicit PreparedHarmoeny(HarmoenyParams params) : params_(std::move(params)) {}
  absl::StatusOr<std::shared_ptr<const WiringRun>> start_run(const RunContext& ctx) const override {
    WiringGraph g = barrier_graph(ctx);
    g.slot_device = per_device_slots(ctx);
    g.dispatch_rule = std::make_shared<const RebalancedDispatch>(params_);
    std::vector<std::shared_ptr<engine::exec::CpuExpertSlots>> slots;
    if (ctx.model) {
      // HarMoEny §4.3 on cpu: every device's slots and the worker that copies experts in.
      for (int64_t d = 0; d < ctx.placement.num_devices; ++d) {
        slots.push_back(std::make_shared<engine::exec::CpuExpertSlots>(ctx.model, params_.slots));
      }
    }
    return std::make_shared<const HarmoenyRun>(std::move(g), params_, std::move(slots));
  }

 private:
  HarmoenyParams params_;
};

class HarmoenyWiring final : public Wiring {
 public:
  std::string_view name() const override { return "harmoeny"; }
  WiringTraits traits() const override {
    return {.disaggregated_attention = false,
            .per_block_placement = false,
            .capability_placement = true};
  }
  absl::StatusOr<std::shared_ptr<const PreparedWiring>> prepare(
      const WiringSetup& s) const override {
    absl::StatusOr<HarmoenyParams> p = resolve_harmoeny(s.topology, s.config, s.placement, s.sim,
                                                        s.precision, s.weight_bytes, s.rate_kind);
    if (!p.ok()) return p.status();
    return std::make_shared<const PreparedHarmoeny>(std::move(*p));
  }
};

}  // namespace

const Wiring& harmoeny_wiring() {
  static const HarmoenyWiring wiring;
  return wiring;
}

}  // namespace muflow::actors
