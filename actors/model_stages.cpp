#include "actors/model_stages.hpp"

#include <map>

#include "absl/strings/str_format.h"
#include "engine/sampling.hpp"
#include "engine/token_pool.hpp"

namespace muflow::actors {
namespace {

using engine::Activations;
using engine::LayerId;
using engine::Payload;
using engine::StageKind;
using engine::TokenBatch;
using engine::TokenBatchPtr;
using engine::TokenMeta;

/// The layer that merges block `block`'s expert outputs for `rank`.
LayerId merge_target(const RunContext& ctx, int32_t block, int32_t rank) {
  const auto num_layers = static_cast<int32_t>(ctx.model->config().num_layers);
  if (block + 1 < num_layers) return {StageKind::kAttention, block + 1, rank};
  return {StageKind::kSampler, num_layers, rank};
}

caf::actor merge_actor(const RunContext& ctx, int32_t block, int32_t rank) {
  const LayerId l = merge_target(ctx, block, rank);
  return l.kind == StageKind::kSampler ? ctx.actors.samplers[rank]
                                       : ctx.actors.attention[l.block][rank];
}

TokenBatchPtr new_batch(LayerId layer, Payload payload, int64_t iteration, int64_t width) {
  auto b = std::make_shared<TokenBatch>();
  b->layer = layer;
  b->payload = payload;
  b->iteration = iteration;
  b->act = std::make_shared<Activations>(0, width);
  return b;
}

void push_row(TokenBatch& b, const TokenMeta& meta, const float* row, int64_t width) {
  b.tokens.push_back(meta);
  b.act->data.insert(b.act->data.end(), row, row + width);
  ++b.act->num_rows;
}

// ---------------------------------------------------------------------------------------------
class AttentionStage final : public StageImpl {
 public:
  AttentionStage(RunContextPtr ctx, int32_t block, int32_t rank)
      : ctx_(std::move(ctx)),
        block_(block),
        rank_(rank),
        cfg_(ctx_->model->config()),
        kv_(cfg_.num_kv_heads * cfg_.head_dim),
        pool_(cfg_.hidden_size, cfg_.num_topk, 1) {}

  absl::Status enqueue(const TokenBatchPtr& batch, std::vector<Send>& now) override {
    if (block_ == 0) {
      if (batch->payload != Payload::kTokenIds) return bad_payload(*batch);
      if (batch->num_tokens() == 0) return emit(batch->iteration, {}, {}, now);
      queued_.emplace(batch->iteration, batch);
      return absl::OkStatus();
    }
    absl::Status s = batch->payload == Payload::kResidual ? pool_.add_residual(*batch)
                     : batch->payload == Payload::kExpertOutputs
                         ? pool_.add_expert_outputs(*batch)
                         : bad_payload(*batch);
    if (!s.ok()) return s;
    const int64_t it = pool_.complete_iteration();
    if (it >= 0 && pool_.num_tokens(it) == 0) {
      (void)pool_.take(it);
      return emit(it, {}, {}, now);
    }
    return absl::OkStatus();
  }

  int64_t ready_tokens() const override {
    if (block_ == 0) return queued_.empty() ? 0 : queued_.begin()->second->num_tokens();
    const int64_t it = pool_.complete_iteration();
    return it < 0 ? 0 : pool_.num_tokens(it);
  }

  absl::Status run(std::vector<Send>& out, RunInfo& info) override {
    std::vector<TokenMeta> meta;
    std::vector<float> h;
    const int64_t H = cfg_.hidden_size;
    if (block_ == 0) {
      if (queued_.empty()) return absl::OkStatus();
      TokenBatchPtr b = queued_.begin()->second;
      queued_.erase(queued_.begin());
      info.iteration = b->iteration;
      meta = b->tokens;
      std::vector<int32_t> ids(meta.size());
      for (size_t i = 0; i < meta.size(); ++i) ids[i] = meta[i].token_id;
      h.resize(meta.size() * H);
      ctx_->model->embed(ids.data(), static_cast<int64_t>(ids.size()), h.data());
    } else {
      const int64_t it = pool_.complete_iteration();
      if (it < 0) return absl::OkStatus();
      absl::StatusOr<engine::MergedTokens> merged = pool_.take(it);
      if (!merged.ok()) return merged.status();
      info.iteration = it;
      meta = std::move(merged->tokens);
      h = std::move(merged->h);
    }
    info.num_tokens = static_cast<int64_t>(meta.size());
    info.num_requests = count_requests(meta);
    return emit(info.iteration, std::move(meta), std::move(h), out);
  }

  void release(int64_t request_id) override { kv_.release(request_id); }
  int64_t kv_bytes() const override { return kv_.bytes_used(); }
  std::string name() const override { return absl::StrFormat("attn b%d r%d", block_, rank_); }
  LayerId layer() const override { return {StageKind::kAttention, block_, rank_}; }

 private:
  absl::Status bad_payload(const TokenBatch& b) const {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: unexpected payload %d", name(), static_cast<int>(b.payload)));
  }

  // Runs attention on `h` (may be empty) and sends dispatch + residual for `iteration`.
  absl::Status emit(int64_t iteration, std::vector<TokenMeta> meta, std::vector<float> h,
                    std::vector<Send>& out) {
    const int64_t n = static_cast<int64_t>(meta.size());
    const int64_t H = cfg_.hidden_size, K = cfg_.num_topk, E = cfg_.num_experts;
    const bool shared = cfg_.shared_expert_ffn > 0;
    std::vector<float> x(n * H), w(n * K), sh(shared ? n * H : 0);
    std::vector<int32_t> ids(n * K);
    if (n > 0) {
      std::vector<int64_t> rids(n), pos(n);
      for (int64_t i = 0; i < n; ++i) {
        rids[i] = meta[i].request_id;
        pos[i] = meta[i].position;
      }
      engine::AttentionOutputs o{x.data(), ids.data(), w.data(), shared ? sh.data() : nullptr};
      if (absl::Status s = ctx_->model->attention(block_, kv_, rids.data(), pos.data(), n,
                                                  h.data(), o);
          !s.ok()) {
        return s;
      }
    }
    auto contrib = std::make_shared<Contribution>();
    contrib->iteration = iteration;
    contrib->source = rank_;
    contrib->parts.resize(E);
    for (int32_t e = 0; e < E; ++e) {
      contrib->parts[e] =
          new_batch({StageKind::kExpert, block_, e}, Payload::kExpertInputs, iteration, H);
    }
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < K; ++j) {
        TokenMeta m = meta[i];
        m.origin_rank = rank_;
        m.topk_rank = static_cast<int16_t>(j);
        m.topk_weight = w[i * K + j];
        push_row(*contrib->parts[ids[i * K + j]], m, x.data() + i * H, H);
      }
    }
    out.push_back({ctx_->actors.dispatch[block_], caf::make_message(contrib_atom::value, contrib)});
    const int64_t width = shared ? 2 * H : H;
    TokenBatchPtr residual =
        new_batch(merge_target(*ctx_, block_, rank_), Payload::kResidual, iteration, width);
    residual->tokens = meta;
    residual->act->num_rows = n;
    residual->act->data.resize(n * width);
    for (int64_t i = 0; i < n; ++i) {
      std::copy(h.begin() + i * H, h.begin() + (i + 1) * H, residual->act->row(i));
      if (shared) std::copy(sh.begin() + i * H, sh.begin() + (i + 1) * H, residual->act->row(i) + H);
    }
    out.push_back({merge_actor(*ctx_, block_, rank_), caf::make_message(batch_atom::value, residual)});
    return absl::OkStatus();
  }

  RunContextPtr ctx_;
  int32_t block_, rank_;
  const engine::ModelConfig& cfg_;
  engine::KvCache kv_;
  engine::TokenPool pool_;
  std::map<int64_t, TokenBatchPtr> queued_;  // block 0: iteration → token ids
};

// ---------------------------------------------------------------------------------------------
class ExpertStage final : public StageImpl {
 public:
  ExpertStage(RunContextPtr ctx, int32_t block, int32_t expert)
      : ctx_(std::move(ctx)), block_(block), expert_(expert) {}

  absl::Status enqueue(const TokenBatchPtr& batch, std::vector<Send>& now) override {
    if (batch->payload != Payload::kExpertInputs) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: unexpected payload", name()));
    }
    if (batch->num_tokens() == 0) {
      compute_and_send(*batch, now);
      return absl::OkStatus();
    }
    queued_.emplace(batch->iteration, batch);
    return absl::OkStatus();
  }

  int64_t ready_tokens() const override {
    return queued_.empty() ? 0 : queued_.begin()->second->num_tokens();
  }

  absl::Status run(std::vector<Send>& out, RunInfo& info) override {
    if (queued_.empty()) return absl::OkStatus();
    TokenBatchPtr b = queued_.begin()->second;
    queued_.erase(queued_.begin());
    info.num_tokens = b->num_tokens();
    info.num_requests = count_requests(b->tokens);
    info.iteration = b->iteration;
    compute_and_send(*b, out);
    return absl::OkStatus();
  }

  std::string name() const override { return absl::StrFormat("expert b%d e%d", block_, expert_); }
  LayerId layer() const override { return {StageKind::kExpert, block_, expert_}; }

 private:
  void compute_and_send(const TokenBatch& in, std::vector<Send>& out) {
    const int64_t n = in.num_tokens(), H = ctx_->model->config().hidden_size;
    std::vector<float> y(n * H);
    if (n > 0) ctx_->model->expert(block_, expert_, in.act->data.data(), n, y.data());
    auto contrib = std::make_shared<Contribution>();
    contrib->iteration = in.iteration;
    contrib->source = expert_;
    contrib->parts.resize(ctx_->num_ranks);
    for (int32_t r = 0; r < ctx_->num_ranks; ++r) {
      contrib->parts[r] = new_batch(merge_target(*ctx_, block_, r), Payload::kExpertOutputs,
                                    in.iteration, H);
    }
    for (int64_t i = 0; i < n; ++i) {
      push_row(*contrib->parts[in.tokens[i].origin_rank], in.tokens[i], y.data() + i * H, H);
    }
    out.push_back({ctx_->actors.combine[block_], caf::make_message(contrib_atom::value, contrib)});
  }

  RunContextPtr ctx_;
  int32_t block_, expert_;
  std::map<int64_t, TokenBatchPtr> queued_;
};

// ---------------------------------------------------------------------------------------------
class SamplerStage final : public StageImpl {
 public:
  SamplerStage(RunContextPtr ctx, int32_t rank)
      : ctx_(std::move(ctx)),
        rank_(rank),
        pool_(ctx_->model->config().hidden_size, ctx_->model->config().num_topk, 1) {}

  absl::Status enqueue(const TokenBatchPtr& batch, std::vector<Send>& now) override {
    absl::Status s = batch->payload == Payload::kResidual ? pool_.add_residual(*batch)
                     : batch->payload == Payload::kExpertOutputs
                         ? pool_.add_expert_outputs(*batch)
                         : absl::InvalidArgumentError(name() + ": unexpected payload");
    if (!s.ok()) return s;
    const int64_t it = pool_.complete_iteration();
    if (it >= 0 && pool_.num_tokens(it) == 0) {
      (void)pool_.take(it);
      auto report = std::make_shared<SampledBatch>();
      report->iteration = it;
      report->rank = rank_;
      now.push_back({ctx_->actors.coordinator, caf::make_message(sampled_atom::value, report)});
    }
    return absl::OkStatus();
  }

  int64_t ready_tokens() const override {
    const int64_t it = pool_.complete_iteration();
    return it < 0 ? 0 : pool_.num_tokens(it);
  }

  absl::Status run(std::vector<Send>& out, RunInfo& info) override {
    const int64_t it = pool_.complete_iteration();
    if (it < 0) return absl::OkStatus();
    absl::StatusOr<engine::MergedTokens> merged = pool_.take(it);
    if (!merged.ok()) return merged.status();
    info.iteration = it;
    info.num_tokens = static_cast<int64_t>(merged->tokens.size());
    info.num_requests = count_requests(merged->tokens);
    const int64_t num_tokens = info.num_tokens;
    const engine::ModelConfig& c = ctx_->model->config();
    const int64_t H = c.hidden_size, V = c.vocab_size;
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < num_tokens; ++i) {
      if (merged->tokens[i].flags & (engine::kSample | engine::kNeedsLogits)) rows.push_back(i);
    }
    std::vector<float> h(rows.size() * H), logits(rows.size() * V);
    for (size_t r = 0; r < rows.size(); ++r) {
      std::copy(merged->h.begin() + rows[r] * H, merged->h.begin() + (rows[r] + 1) * H,
                h.begin() + r * H);
    }
    if (!rows.empty()) ctx_->model->logits(h.data(), static_cast<int64_t>(rows.size()), logits.data());
    auto report = std::make_shared<SampledBatch>();
    report->iteration = it;
    report->rank = rank_;
    for (size_t r = 0; r < rows.size(); ++r) {
      const TokenMeta& m = merged->tokens[rows[r]];
      SampledToken t;
      t.request_id = m.request_id;
      t.position = m.position;
      const float* lr = logits.data() + r * V;
      if (m.flags & engine::kSample) {
        t.token = engine::sample_token(lr, V, ctx_->topology.sampling, m.request_id,
                                       m.position + 1);
      }
      if (m.flags & engine::kNeedsLogits) t.logits.assign(lr, lr + V);
      report->rows.push_back(std::move(t));
    }
    out.push_back({ctx_->actors.coordinator, caf::make_message(sampled_atom::value, report)});
    return absl::OkStatus();
  }

  std::string name() const override { return absl::StrFormat("sampler r%d", rank_); }
  LayerId layer() const override {
    return {StageKind::kSampler, static_cast<int32_t>(ctx_->model->config().num_layers), rank_};
  }

 private:
  RunContextPtr ctx_;
  int32_t rank_;
  engine::TokenPool pool_;
};

}  // namespace

std::shared_ptr<StageImpl> make_attention_stage(RunContextPtr ctx, int32_t block, int32_t rank) {
  return std::make_shared<AttentionStage>(std::move(ctx), block, rank);
}
std::shared_ptr<StageImpl> make_expert_stage(RunContextPtr ctx, int32_t block, int32_t expert) {
  return std::make_shared<ExpertStage>(std::move(ctx), block, expert);
}
std::shared_ptr<StageImpl> make_sampler_stage(RunContextPtr ctx, int32_t rank) {
  return std::make_shared<SamplerStage>(std::move(ctx), rank);
}

}  // namespace muflow::actors
