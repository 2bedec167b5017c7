#include "engine/exec/sim_executor.hpp"

#include <algorithm>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_format.h"
#include "engine/planning/moeshard_plan.hpp"
#include "engine/serving/sampling.hpp"
#include "kernels/assert.hpp"
#include "kernels/sim/op_cost.hpp"

namespace muflow::engine::exec {

SimExecutor::SimExecutor(const model::ModelConfig& config, kernels::sim::DeviceKind kind,
                         std::shared_ptr<const kernels::sim::CostModel> cost,
                         std::shared_ptr<const routing::RouterModel> router,
                         kernels::sim::Precision precision,
                         std::shared_ptr<const kernels::sim::MeasuredKernels> measured,
                         std::shared_ptr<DeviceActivity> activity, int64_t device)
    : config_(config),
      kind_(std::move(kind)),
      cost_(std::move(cost)),
      router_(std::move(router)),
      precision_(precision),
      measured_(std::move(measured)),
      activity_(std::move(activity)),
      device_(device) {}

void SimExecutor::set_device_busy(bool busy, double now_s) {
  if (activity_) activity_->set_busy(device_, busy, now_s);
}

DeviceActivity::SharedWork SimExecutor::take_shared_work() {
  return std::exchange(shared_, DeviceActivity::SharedWork{});
}

double SimExecutor::measured_expert_seconds(int64_t n, int64_t ffn) {
  // The calibration timed `concurrent` devices at once; 0 = this one ran alone.
  const int64_t others = measured_->concurrent() - 1;
  const double busy_share =
      activity_ && others > 0 ? std::min(1.0, static_cast<double>(activity_->busy_peers(device_)) /
                                                  static_cast<double>(others))
                              : 1.0;
  const double charged = measured_->expert_seconds(n, ffn, busy_share);
  if (activity_ && others > 0 && measured_->has_expert_alone()) {
    const double alone = measured_->expert_seconds(n, ffn, 0.0);
    const double shared = measured_->expert_seconds(n, ffn, 1.0);
    if (alone > 0 && alone != shared) {
      shared_.alone_s += alone;
      shared_.shared_s += shared;
      shared_.charged_s += charged;
      shared_.others = others;
    }
  }
  return charged;
}

double SimExecutor::seconds_for(const kernels::sim::OpCost& cost, int64_t num_tokens) const {
  return cost_->seconds(kind_, precision_, cost, num_tokens);
}

absl::Status SimExecutor::attention(int64_t block, serving::KvCache& kv,
                                    const std::vector<dataflow::TokenMeta>& tokens, float* h,
                                    const AttentionResult& out, double* seconds) {
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t K = config_.num_topk;
  // Per request: tokens in this batch and the context they attend to (the cache afterwards),
  // in ascending request id (the order of the cost's sums). A batch holds each request's
  // tokens together, mostly in ascending request id (the merge order), so runs of one request
  // are counted in place and sorted only when they came in another order; a std::map per
  // stage run was a measurable share of a 256-device simulation (#19 item 6).
  absl::InlinedVector<std::pair<int64_t, kernels::sim::AttentionSequence>, 16> seqs;
  bool ascending = true;
  for (const dataflow::TokenMeta& t : tokens) {
    if (!kv.append(t.request_id, t.position, nullptr, nullptr)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "block %d: request %d position %d does not continue its KV cache (length %d)", block,
          t.request_id, t.position, kv.length(t.request_id)));
    }
    if (seqs.empty() || seqs.back().first != t.request_id) {
      ascending = ascending && (seqs.empty() || seqs.back().first < t.request_id);
      seqs.push_back({t.request_id, {}});
    }
    kernels::sim::AttentionSequence& s = seqs.back().second;
    ++s.num_tokens;
    s.context_len = std::max(s.context_len, t.position + 1);
  }
  if (!ascending) {
    // Runs of one request that are not adjacent are merged, as one entry per request.
    std::stable_sort(seqs.begin(), seqs.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    size_t w = 0;
    for (size_t r = 1; r < seqs.size(); ++r) {
      if (seqs[r].first == seqs[w].first) {
        seqs[w].second.num_tokens += seqs[r].second.num_tokens;
        seqs[w].second.context_len =
            std::max(seqs[w].second.context_len, seqs[r].second.context_len);
      } else {
        seqs[++w] = seqs[r];
      }
    }
    seqs.resize(seqs.empty() ? 0 : w + 1);
  }
  absl::InlinedVector<kernels::sim::AttentionSequence, 16> list;
  for (const auto& [id, s] : seqs) list.push_back(s);
  const kernels::sim::AttentionDims dims{config_.hidden_size, config_.num_heads,
                                         config_.num_kv_heads, config_.head_dim};
  kernels::sim::OpCost cost = kernels::sim::attention_cost(dims, list, precision_) +
                              kernels::sim::router_cost(n, config_.hidden_size,
                                                        config_.num_experts, precision_);
  if (config_.shared_expert_ffn > 0) {
    cost += kernels::sim::shared_expert_cost(n, config_.hidden_size, config_.shared_expert_ffn,
                                             precision_, /*gated=*/true);
  }
  *seconds = measured_ ? measured_->attention_seconds(list) : seconds_for(cost, n);
  for (int64_t i = 0; i < n; ++i) {
    router_->route(static_cast<int32_t>(block), tokens[i].request_id, tokens[i].position,
                   out.topk_ids + i * K, out.topk_weights + i * K);
  }
  return absl::OkStatus();
}

void SimExecutor::expert(int64_t block, int64_t expert, const float* x, int64_t n, float* y,
                         double* seconds) {
  if (measured_) {
    *seconds = measured_expert_seconds(n, config_.expert_ffn);
    return;
  }
  *seconds = seconds_for(
      kernels::sim::expert_ffn_cost(n, config_.hidden_size, config_.expert_ffn, precision_,
                                    config_.gated_experts ? kernels::sim::FfnKind::kSwiGlu
                                                          : kernels::sim::FfnKind::kTwoLayer),
      n);
}

void SimExecutor::expert_shard(int64_t block, int64_t expert, int64_t shard, int64_t num_shards,
                               const float* x, int64_t n, float* y, double* seconds) {
  // The shard's width from the same plan the cpu backend slices weights with.
  absl::StatusOr<planning::ShardPlan> plan =
      planning::moeshard_plan(config_.expert_ffn, num_shards);
  MUFLOW_ASSERT(plan.ok() && shard >= 0 && shard < num_shards,
                "SimExecutor::expert_shard: bad shard index or count");
  const int64_t ffn = plan->ranges[shard].size();
  if (measured_) {
    *seconds = ffn == 0 ? 0.0 : measured_expert_seconds(n, ffn);
    return;
  }
  *seconds = ffn == 0 ? 0.0
                      : seconds_for(kernels::sim::expert_ffn_cost(
                                        n, config_.hidden_size, ffn, precision_,
                                        config_.gated_experts ? kernels::sim::FfnKind::kSwiGlu
                                                              : kernels::sim::FfnKind::kTwoLayer),
                                    n);
}

namespace {

/// The measured-kernels run kind of a stage kind (host_* rows, spread metadata).
kernels::sim::MeasuredKernels::RunKind run_kind(dataflow::StageKind kind) {
  using K = kernels::sim::MeasuredKernels::RunKind;
  switch (kind) {
    case dataflow::StageKind::kAttention:
      return K::kAttention;
    case dataflow::StageKind::kExpert:
      return K::kExpert;
    case dataflow::StageKind::kSampler:
      return K::kSampler;
  }
  MUFLOW_ASSERT(false, "run_kind: StageKind out of range");
  return K::kAttention;
}

}  // namespace

double SimExecutor::stage_host_seconds(dataflow::StageKind kind, int64_t num_tokens) const {
  return measured_ ? measured_->host_seconds(run_kind(kind), num_tokens) : 0.0;
}

double SimExecutor::run_spread(dataflow::StageKind kind) const {
  return measured_ ? measured_->run_spread(run_kind(kind)) : 0.0;
}

double SimExecutor::barrier_host_seconds(bool dispatch, int64_t rows) const {
  if (!measured_) return 0.0;
  using K = kernels::sim::MeasuredKernels::RunKind;
  return measured_->host_seconds(dispatch ? K::kDispatch : K::kCombine, rows);
}

double SimExecutor::grant_host_seconds() const {
  if (!measured_) return 0.0;
  return measured_->host_seconds(kernels::sim::MeasuredKernels::RunKind::kGrant, 1);
}

void SimExecutor::sample(const std::vector<dataflow::TokenMeta>& rows, const float* h,
                         const std::vector<topology::SamplingSpec>& sampling, std::vector<int32_t>* tokens,
                         std::vector<std::vector<float>>* logits, double* seconds) {
  MUFLOW_ASSERT(sampling.size() == rows.size(), "SimExecutor::sample: one SamplingSpec per row");
  const auto n = static_cast<int64_t>(rows.size());
  *seconds = measured_ ? measured_->lm_head_seconds(n)
                       : seconds_for(kernels::sim::lm_head_cost(n, config_.hidden_size,
                                                                config_.vocab_size, precision_),
                                     n);
  tokens->assign(n, -1);
  logits->assign(n, {});
  // A stand-in token id in [3, vocab): never BOS (1) or EOS (2), reproducible per position.
  const double span = static_cast<double>(std::max<int64_t>(1, config_.vocab_size - 3));
  for (int64_t i = 0; i < n; ++i) {
    if (!(rows[i].flags & dataflow::kSample)) continue;
    const double u =
        serving::counter_uniform(sampling[i].seed,
                                 static_cast<uint64_t>(sampling[i].key_by_request ? rows[i].request_id : 0),
                                 static_cast<uint64_t>(rows[i].position + 1));
    (*tokens)[i] = static_cast<int32_t>(3 + static_cast<int64_t>(u * span));
  }
}

}  // namespace muflow::engine::exec
