#include "actors/model_stages.hpp"

#include <algorithm>
#include <deque>
#include <map>

#include "absl/strings/str_format.h"
#include "engine/dataflow/token_pool.hpp"
#include "kernels/assert.hpp"

namespace muflow::actors {
namespace {

using engine::dataflow::LayerId;
using engine::dataflow::make_batch;
using engine::dataflow::Payload;
using engine::dataflow::StageKind;
using engine::dataflow::TokenBatch;
using engine::dataflow::TokenBatchPtr;
using engine::dataflow::TokenMeta;

/// The layer that merges block `block`'s expert outputs for `rank`.
LayerId merge_target(const RunContext& ctx, int32_t block, int32_t rank) {
  const auto num_layers = static_cast<int32_t>(ctx.config.num_layers);
  if (block + 1 < num_layers) return {StageKind::kAttention, block + 1, rank};
  return {StageKind::kSampler, num_layers, rank};
}

caf::actor merge_actor(const RunContext& ctx, int32_t block, int32_t rank) {
  const LayerId l = merge_target(ctx, block, rank);
  return l.kind == StageKind::kSampler ? ctx.actors.samplers[rank]
                                       : ctx.actors.attention[l.block][rank];
}

/// AttentionStage::emit's scratch, one per thread (emit does not nest): router weights and
/// expert ids [n, K] of the run.
struct EmitScratch {
  std::vector<float> w;
  std::vector<int32_t> ids;
};
EmitScratch& emit_scratch() {
  thread_local EmitScratch scratch;
  return scratch;
}

inline void push_row(TokenBatch& b, const TokenMeta& meta, const float* row, int64_t width) {
  b.tokens.push_back(meta);
  if (width > 0) b.act->data.insert(b.act->data.end(), row, row + width);  // sim: no floats
  ++b.act->num_rows;
}

// The token pool of a merge point under the graph's merge rule, waiting for
// `residual_sources` residual batches per iteration (iteration merge).
engine::dataflow::TokenPool make_pool(const RunContext& ctx, int64_t width,
                                      int64_t residual_sources) {
  const WiringGraph& g = ctx.graph();
  switch (g.merge) {
    case MergeRule::kRequest:
      return engine::dataflow::TokenPool::per_request(width, ctx.config.num_topk);
    case MergeRule::kWave:
      return engine::dataflow::TokenPool::per_request(width, ctx.config.num_topk, /*by_wave=*/true);
    case MergeRule::kIteration:
      break;
  }
  return engine::dataflow::TokenPool(width, ctx.config.num_topk, 1, residual_sources);
}

/// A point-to-point send of token batch `b` to `dest` on device `to_device`.
Send p2p(const RunContext& ctx, caf::actor dest, int64_t to_device, TokenBatchPtr b) {
  const int64_t bytes = b->num_tokens() * ctx.config.hidden_size * ctx.activation_bytes;
  return {std::move(dest), caf::make_message(batch_atom::value, std::move(b)), to_device, bytes};
}

/// Barrier-free μ-queue of whole batches: FIFO, taken whole while the total stays <= max
/// (at least one batch), so a request's group is never split.
class BatchQueue {
 public:
  void push(TokenBatchPtr b) {
    tokens_ += b->num_tokens();
    q_.push_back(std::move(b));
  }
  int64_t tokens() const { return tokens_; }
  bool empty() const { return q_.empty(); }
  /// Removes batches from the front up to `max_tokens` tokens.
  std::vector<TokenBatchPtr> take(int64_t max_tokens) {
    std::vector<TokenBatchPtr> out;
    int64_t n = 0;
    while (!q_.empty() && (out.empty() || n + q_.front()->num_tokens() <= max_tokens)) {
      n += q_.front()->num_tokens();
      out.push_back(std::move(q_.front()));
      q_.pop_front();
    }
    tokens_ -= n;
    return out;
  }

 private:
  std::deque<TokenBatchPtr> q_;
  int64_t tokens_ = 0;
};

// ---------------------------------------------------------------------------------------------
class AttentionStage final : public StageImpl {
 public:
  AttentionStage(RunContextPtr ctx, engine::exec::Executor* exec, int32_t block, int32_t rank,
                 int64_t residual_sources)
      : ctx_(std::move(ctx)),
        exec_(exec),
        block_(block),
        rank_(rank),
        cfg_(ctx_->config),
        width_(exec->activation_width()),
        fifo_input_(ctx_->graph().input == InputRule::kFifo),
        kv_(ctx_->wiring->kv_cache(block, rank,
                                   width_ > 0 ? cfg_.num_kv_heads * cfg_.head_dim : 0)),
        pool_(make_pool(*ctx_, width_, residual_sources)) {}

  absl::Status enqueue(const TokenBatchPtr& batch, std::vector<Send>& now) override {
    if (block_ == 0) {
      if (batch->payload != Payload::kTokenIds) return bad_payload(*batch);
      if (fifo_input_) {
        if (batch->num_tokens() > 0) fresh_.push(batch);
        return absl::OkStatus();
      }
      if (batch->num_tokens() == 0) return emit(batch->iteration, {}, {}, now, nullptr);
      queued_.emplace(batch->iteration, batch);
      return absl::OkStatus();
    }
    absl::Status s = batch->payload == Payload::kResidual        ? pool_.add_residual(*batch)
                     : batch->payload == Payload::kExpertOutputs ? pool_.add_expert_outputs(*batch)
                                                                 : bad_payload(*batch);
    if (!s.ok()) return s;
    const int64_t it = pool_.complete_iteration();
    if (it >= 0 && pool_.num_tokens(it) == 0) {
      (void)pool_.take(it);
      return emit(it, {}, {}, now, nullptr);
    }
    return absl::OkStatus();
  }

  int64_t ready_tokens() const override {
    if (block_ == 0) {
      if (fifo_input_) return fresh_.tokens();
      return queued_.empty() ? 0 : queued_.begin()->second->num_tokens();
    }
    return pool_.ready_tokens();
  }

  absl::Status run(std::vector<Send>& out, RunInfo& info) override {
    std::vector<TokenMeta> meta;
    std::vector<float> h;
    if (block_ == 0 && fifo_input_) {
      if (fresh_.empty()) return absl::OkStatus();
      std::vector<TokenBatchPtr> batches = fresh_.take(ctx_->graph().max_batch_tokens);
      info.iteration = batches.front()->iteration;
      for (const TokenBatchPtr& b : batches) {
        meta.insert(meta.end(), b->tokens.begin(), b->tokens.end());
      }
      h.resize(meta.size() * width_);
      exec_->embed(meta, h.data());
    } else if (block_ == 0) {
      if (queued_.empty()) return absl::OkStatus();
      TokenBatchPtr b = queued_.begin()->second;
      queued_.erase(queued_.begin());
      info.iteration = b->iteration;
      meta = b->tokens;
      h.resize(meta.size() * width_);
      exec_->embed(meta, h.data());
    } else {
      absl::StatusOr<engine::dataflow::MergedTokens> merged =
          pool_.take_ready(ctx_->graph().max_batch_tokens);
      if (!merged.ok()) return merged.status();
      if (merged->tokens.empty()) return absl::OkStatus();
      info.iteration = merged->iteration;
      meta = std::move(merged->tokens);
      h = std::move(merged->h);
    }
    info.num_tokens = static_cast<int64_t>(meta.size());
    info.num_requests = ctx_->trace ? count_requests(meta) : 0;
    absl::Status s = emit(info.iteration, std::move(meta), std::move(h), out, &info.seconds);
    info.seconds = std::max(
        0.0, info.seconds + exec_->stage_host_seconds(StageKind::kAttention, info.num_tokens));
    return s;
  }

  void release(int64_t request_id) override {
    std::lock_guard<std::mutex> lock(kv_->mutex);
    kv_->cache.release(request_id);
  }
  int64_t kv_bytes() const override {
    std::lock_guard<std::mutex> lock(kv_->mutex);
    return kv_->cache.bytes_used();
  }
  absl::Status apply_kv_rows(const KvRows& rows) override {
    std::lock_guard<std::mutex> lock(kv_->mutex);
    const int64_t w = rows.width;
    for (size_t i = 0; i < rows.request_ids.size(); ++i) {
      const float* k = w > 0 ? rows.k.data() + i * w : nullptr;
      const float* v = w > 0 ? rows.v.data() + i * w : nullptr;
      if (!kv_->cache.append(rows.request_ids[i], rows.positions[i], k, v)) {
        return absl::InternalError(absl::StrFormat(
            "%s: KV replica of request %d got position %d but holds %d", name(),
            rows.request_ids[i], rows.positions[i], kv_->cache.length(rows.request_ids[i])));
      }
    }
    return absl::OkStatus();
  }
  std::string name() const override { return absl::StrFormat("attn b%d r%d", block_, rank_); }
  LayerId layer() const override { return {StageKind::kAttention, block_, rank_}; }

 private:
  absl::Status bad_payload(const TokenBatch& b) const {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: unexpected payload %d", name(), static_cast<int>(b.payload)));
  }

  // Runs attention on `h` (may be empty) and sends dispatch + residual for `iteration`.
  // `seconds` (may be null for an empty iteration) receives the executor's modeled duration.
  absl::Status emit(int64_t iteration, std::vector<TokenMeta> meta, std::vector<float> h,
                    std::vector<Send>& out, double* seconds) {
    const int64_t n = static_cast<int64_t>(meta.size());
    const int64_t H = width_, K = cfg_.num_topk, E = cfg_.num_experts;
    const int64_t wave = next_wave_++;  // unique per stage, hence per merge point
    for (TokenMeta& m : meta) m.wave = wave;
    const bool shared = cfg_.shared_expert_ffn > 0;
    std::vector<float> x(n * H), sh(shared ? n * H : 0);
    // Router outputs in the thread's scratch (a run in the sim is a few rows; allocating them
    // per run was a measurable share of a 256-device simulation, and a stage's own scratch is
    // cold in cache when it runs).
    EmitScratch& scratch = emit_scratch();
    std::vector<float>& w = scratch.w;
    std::vector<int32_t>& ids = scratch.ids;
    w.assign(static_cast<size_t>(n * K), 0.f);
    ids.assign(static_cast<size_t>(n * K), 0);
    if (n > 0) {
      engine::exec::AttentionResult o{x.data(), ids.data(), w.data(), shared ? sh.data() : nullptr};
      double modeled = 0.0;
      std::unique_lock<std::mutex> lock(kv_->mutex);
      if (absl::Status s = exec_->attention(block_, kv_->cache, meta, h.data(), o, &modeled);
          !s.ok()) {
        return s;
      }
      if (ctx_->graph().kv_replicated) replicate_kv(meta, out);
      lock.unlock();
      if (seconds) *seconds = modeled;
      if (ctx_->routing) {
        for (int64_t i = 0; i < n; ++i) {
          ctx_->routing->add(meta[i].request_id, meta[i].position, block_, ids.data() + i * K,
                             w.data() + i * K, K);
        }
      }
    }
    // The rank each token continues on: the wiring's rule (exflow), else this one (no vector).
    std::vector<int32_t> next_ranks;
    if (const auto& rule = ctx_->graph().continuation) {
      next_ranks = rule->next_ranks(*ctx_, block_, rank_, meta, ids);
      MUFLOW_ASSERT(static_cast<int64_t>(next_ranks.size()) == n,
                    "a continuation rule gives one rank per token");
    }
    const auto next = [&](int64_t i) {
      return next_ranks.empty() ? rank_ : next_ranks[static_cast<size_t>(i)];
    };
    const WiringGraph& graph = ctx_->graph();
    if (graph.dispatch == EdgeKind::kBarrier && graph.dispatch_rule->takes_whole_rows()) {
      // One batch of every row, row q = token q / K's q % K-th choice, for the collective to
      // split (Contribution's whole form).
      auto contrib = std::make_shared<Contribution>();
      contrib->iteration = iteration;
      contrib->source = rank_;
      if (n > 0) {
        contrib->whole = make_batch({StageKind::kExpert, block_, -1}, Payload::kExpertInputs,
                                    iteration, H, n * K);
        for (int64_t i = 0; i < n; ++i) {
          TokenMeta m = meta[static_cast<size_t>(i)];
          m.origin_rank = next(i);  // where the combine delivers this token's outputs
          for (int64_t k = 0; k < K; ++k) {
            m.topk_rank = static_cast<int16_t>(k);
            m.topk_weight = w[static_cast<size_t>(i * K + k)];
            push_row(*contrib->whole, m, x.data() + i * H, H);
          }
        }
        contrib->row_dest.assign(ids.begin(), ids.begin() + n * K);
      }
      out.push_back({ctx_->actors.dispatch[block_],
                     caf::make_message(contrib_atom::value, ContributionPtr(contrib))});
      return send_residuals(iteration, std::move(meta), std::move(h), sh, next_ranks.empty(), next,
                            out);
    }
    // Parts only for the experts that get a token (a run of no token sends none), each sized
    // once for its rows; row q is token q / K's q % K-th choice.
    const ContributionPtr contrib = group_rows(
        iteration, rank_, static_cast<size_t>(E), n * K,
        [&](int64_t q) { return ids[static_cast<size_t>(q)]; },
        [&](int32_t e, int64_t rows) {
          return make_batch({StageKind::kExpert, block_, e}, Payload::kExpertInputs, iteration, H,
                            rows);
        },
        [&](TokenBatch& part, int64_t q) {
          const int64_t i = q / K;
          TokenMeta m = meta[static_cast<size_t>(i)];
          m.origin_rank = next(i);  // where the combine delivers this token's outputs
          m.topk_rank = static_cast<int16_t>(q - i * K);
          m.topk_weight = w[static_cast<size_t>(q)];
          push_row(part, m, x.data() + i * H, H);
        },
        thread_group_scratch());
    if (graph.dispatch == EdgeKind::kPointToPoint) {
      // No barrier: each expert's rows go straight to its μ-queue on its device (slot e runs
      // expert e).
      for (size_t p = 0; p < contrib->parts.size(); ++p) {
        const int32_t e = contrib->dests[p];
        const std::vector<int32_t>* replicas =
            graph.replica_slots.empty() ? nullptr : &graph.replica_slots[block_][e];
        if (replicas == nullptr || replicas->empty()) {
          out.push_back(p2p(*ctx_, ctx_->actors.experts[block_][e], graph.slot_device[block_][e],
                            std::move(contrib->parts[p])));
          continue;
        }
        // A replicated expert: contiguous chunks of its rows, slot e first.
        const TokenBatch& all = *contrib->parts[p];
        const int64_t rows = all.num_tokens();
        const auto k = static_cast<int64_t>(replicas->size()) + 1;
        for (int64_t c = 0; c < k; ++c) {
          const int64_t begin = rows * c / k, end = rows * (c + 1) / k;
          if (begin == end) continue;
          const int32_t slot = c == 0 ? e : (*replicas)[c - 1];
          TokenBatchPtr chunk =
              make_batch({StageKind::kExpert, block_, slot}, Payload::kExpertInputs, iteration, H);
          for (int64_t i = begin; i < end; ++i) {
            push_row(*chunk, all.tokens[i], H > 0 ? all.act->row(i) : nullptr, H);
          }
          out.push_back(p2p(*ctx_, ctx_->actors.experts[block_][slot],
                            graph.slot_device[block_][slot], std::move(chunk)));
        }
      }
    } else {
      out.push_back(
          {ctx_->actors.dispatch[block_], caf::make_message(contrib_atom::value, contrib)});
    }
    return send_residuals(iteration, std::move(meta), std::move(h), sh, next_ranks.empty(), next,
                          out);
  }

  // The residual goes where each token continues: one batch to every residual edge of this
  // rank, possibly empty, since each target's pool waits for one from each of its sources.
  // `meta`, `h`: the run's tokens and their [n, H] residual rows (taken: the last use);
  // `sh`: [n, H] shared-expert rows (empty without a shared expert); `next(i)`: token i's
  // rank, which is this one for every token when `all_here`.
  template <typename Next>
  absl::Status send_residuals(int64_t iteration, std::vector<TokenMeta> meta, std::vector<float> h,
                              const std::vector<float>& sh, bool all_here, const Next& next,
                              std::vector<Send>& out) {
    const WiringGraph& graph = ctx_->graph();
    const int64_t n = static_cast<int64_t>(meta.size());
    const int64_t H = width_;
    const bool shared = cfg_.shared_expert_ffn > 0;
    const int64_t width = shared ? 2 * H : H;
    const std::vector<int32_t>& targets = graph.residual_targets[rank_];
    if (all_here && (!shared || H == 0) && targets.size() == 1 && targets.front() == rank_) {
      // Every token stays on this rank (sync, harmoeny, moeshard) and no shared-expert row is
      // appended to its residual (none, or the sim's rows without activations): the run's
      // rows are the residual batch as they are.
      TokenBatchPtr residual =
          make_batch(merge_target(*ctx_, block_, rank_), Payload::kResidual, iteration, width);
      residual->tokens = std::move(meta);
      residual->act->data = std::move(h);
      residual->act->num_rows = n;
      out.push_back({merge_actor(*ctx_, block_, rank_),
                     caf::make_message(batch_atom::value, std::move(residual)), -1, 0});
      return absl::OkStatus();
    }
    for (const int32_t r : targets) {
      TokenBatchPtr residual =
          make_batch(merge_target(*ctx_, block_, r), Payload::kResidual, iteration, width);
      for (int64_t i = 0; i < n; ++i) {
        if (next(i) != r) continue;
        residual->tokens.push_back(meta[i]);
        residual->act->data.insert(residual->act->data.end(), h.begin() + i * H,
                                   h.begin() + (i + 1) * H);
        if (shared) {
          residual->act->data.insert(residual->act->data.end(), sh.begin() + i * H,
                                     sh.begin() + (i + 1) * H);
        }
      }
      residual->act->num_rows = residual->num_tokens();
      // A token continuing on another device takes its residual stream there (hidden
      // values per token on the wire; the sim charges the transfer).
      const int64_t to = ctx_->placement.rank_device[r];
      const int64_t bytes =
          residual->num_tokens() * cfg_.hidden_size * ctx_->activation_bytes * (shared ? 2 : 1);
      out.push_back({merge_actor(*ctx_, block_, r), caf::make_message(batch_atom::value, residual),
                     r == rank_ ? -1 : to, r == rank_ ? 0 : bytes});
    }
    return absl::OkStatus();
  }

  // Sends the K/V rows this run appended (one per token of `meta`) to this block's stages on
  // every other rank (their replicas); call with kv_->mutex held.
  void replicate_kv(const std::vector<TokenMeta>& meta, std::vector<Send>& out) const {
    const int64_t w = width_ > 0 ? cfg_.num_kv_heads * cfg_.head_dim : 0;
    auto rows = std::make_shared<KvRows>();
    rows->width = w;
    for (const TokenMeta& m : meta) {
      rows->request_ids.push_back(m.request_id);
      rows->positions.push_back(m.position);
      if (w == 0) continue;
      const float* k = kv_->cache.keys(m.request_id) + m.position * w;
      const float* v = kv_->cache.values(m.request_id) + m.position * w;
      rows->k.insert(rows->k.end(), k, k + w);
      rows->v.insert(rows->v.end(), v, v + w);
    }
    const KvRowsPtr shared = std::move(rows);
    for (int32_t r = 0; r < static_cast<int32_t>(ctx_->num_ranks); ++r) {
      if (r == rank_) continue;
      // A local message: the sim charges these bytes with the dispatch all-to-all
      // (actors/wirings/exflow.cpp).
      out.push_back(
          {ctx_->actors.attention[block_][r], caf::make_message(kvrows_atom::value, shared)});
    }
  }

  RunContextPtr ctx_;
  engine::exec::Executor* exec_;
  int32_t block_, rank_;
  const engine::model::ModelConfig& cfg_;
  int64_t width_;    // activation floats per row (0 in simulation)
  bool fifo_input_;  // block 0: InputRule::kFifo
  std::shared_ptr<LockedKvCache> kv_;
  engine::dataflow::TokenPool pool_;
  std::map<int64_t, TokenBatchPtr> queued_;  // block 0, kIteration: iteration → token ids
  BatchQueue fresh_;                         // block 0, kFifo: token ids as they came
  int64_t next_wave_ = 0;                    // id of this stage's next run (TokenMeta::wave)
};

// ---------------------------------------------------------------------------------------------
class ExpertStage final : public StageImpl {
 public:
  /// `slot`: this stage's expert slot of `block` (an expert, or a device, as the wiring cut
  /// them); `kernel` computes its batches.
  ExpertStage(RunContextPtr ctx, engine::exec::Executor* exec, int32_t block, int32_t slot,
              std::unique_ptr<ExpertKernel> kernel)
      : ctx_(std::move(ctx)),
        exec_(exec),
        block_(block),
        slot_(slot),
        fifo_input_(ctx_->graph().input == InputRule::kFifo),
        kernel_(std::move(kernel)) {}

  absl::Status enqueue(const TokenBatchPtr& batch, std::vector<Send>& now) override {
    if (batch->payload != Payload::kExpertInputs) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: unexpected payload", name()));
    }
    if (fifo_input_) {
      if (batch->num_tokens() > 0) fifo_.push(batch);
      return absl::OkStatus();
    }
    if (batch->num_tokens() == 0) {
      compute_and_send(batch, now, nullptr);
      return absl::OkStatus();
    }
    queued_.emplace(batch->iteration, batch);
    return absl::OkStatus();
  }

  int64_t ready_tokens() const override {
    if (fifo_input_) return fifo_.tokens();
    return queued_.empty() ? 0 : queued_.begin()->second->num_tokens();
  }

  absl::Status run(std::vector<Send>& out, RunInfo& info) override {
    TokenBatchPtr b;
    if (fifo_input_) {
      // Re-batch just in time: whatever is queued, from any rank and iteration.
      if (fifo_.empty()) return absl::OkStatus();
      std::vector<TokenBatchPtr> batches = fifo_.take(ctx_->graph().max_batch_tokens);
      b = batches.size() == 1 ? batches.front() : concat(batches);
    } else {
      if (queued_.empty()) return absl::OkStatus();
      b = queued_.begin()->second;
      queued_.erase(queued_.begin());
    }
    info.num_tokens = b->num_tokens();
    info.num_requests = ctx_->trace ? count_requests(b->tokens) : 0;
    info.iteration = b->iteration;
    compute_and_send(b, out, &info.seconds);
    info.seconds = std::max(
        0.0, info.seconds + exec_->stage_host_seconds(StageKind::kExpert, info.num_tokens));
    return absl::OkStatus();
  }

  std::string name() const override { return kernel_->name(); }
  LayerId layer() const override { return {StageKind::kExpert, block_, slot_}; }

 private:
  void compute_and_send(const TokenBatchPtr& batch, std::vector<Send>& out, double* seconds) {
    const TokenBatch& in = *batch;
    const int64_t n = in.num_tokens(), H = exec_->activation_width();
    std::vector<float> y(n * H);
    if (n > 0) {
      const double modeled = kernel_->compute(in, y.data(), out);
      if (seconds) *seconds = modeled;
    }
    if (ctx_->graph().combine == EdgeKind::kBarrier &&
        ctx_->graph().combine_rule->takes_whole_rows()) {
      // Every output row in one batch, in input order, for the collective to split by origin
      // rank (Contribution's whole form). Without activations (sim) the output rows are the
      // input rows: the input batch itself, shared (it is read-only).
      auto contrib = std::make_shared<Contribution>();
      contrib->iteration = in.iteration;
      contrib->source = slot_;
      if (n > 0) {
        if (H == 0) {
          contrib->whole = batch;
        } else {
          TokenBatchPtr whole = make_batch(in.layer, Payload::kExpertOutputs, in.iteration, H);
          whole->tokens = in.tokens;
          whole->act->num_rows = n;
          whole->act->data = std::move(y);
          contrib->whole = std::move(whole);
        }
        contrib->row_dest.reserve(static_cast<size_t>(n));
        for (const TokenMeta& m : in.tokens) contrib->row_dest.push_back(m.origin_rank);
      }
      out.push_back({ctx_->actors.combine[block_],
                     caf::make_message(contrib_atom::value, ContributionPtr(contrib))});
      return;
    }
    // Parts only for the ranks that get a row (a run of no row sends none), each sized once
    // for its rows.
    const ContributionPtr contrib = group_rows(
        in.iteration, slot_, static_cast<size_t>(ctx_->num_ranks), n,
        [&](int64_t i) { return in.tokens[static_cast<size_t>(i)].origin_rank; },
        [&](int32_t r, int64_t rows) {
          return make_batch(merge_target(*ctx_, block_, r), Payload::kExpertOutputs, in.iteration,
                            H, rows);
        },
        [&](TokenBatch& part, int64_t i) {
          push_row(part, in.tokens[static_cast<size_t>(i)], y.data() + i * H, H);
        },
        thread_group_scratch());
    if (ctx_->graph().combine == EdgeKind::kPointToPoint) {
      // No barrier: each origin rank's outputs go straight to its merge point.
      for (size_t p = 0; p < contrib->parts.size(); ++p) {
        const int32_t r = contrib->dests[p];
        out.push_back(p2p(*ctx_, merge_actor(*ctx_, block_, r), ctx_->placement.rank_device[r],
                          std::move(contrib->parts[p])));
      }
      return;
    }
    out.push_back({ctx_->actors.combine[block_], caf::make_message(contrib_atom::value, contrib)});
  }

  // One batch holding the rows of `batches` in order.
  TokenBatchPtr concat(const std::vector<TokenBatchPtr>& batches) const {
    const int64_t H = exec_->activation_width();
    TokenBatchPtr b = make_batch({StageKind::kExpert, block_, slot_}, Payload::kExpertInputs,
                                 batches.front()->iteration, H);
    for (const TokenBatchPtr& part : batches) {
      b->tokens.insert(b->tokens.end(), part->tokens.begin(), part->tokens.end());
      b->act->data.insert(b->act->data.end(), part->act->data.begin(), part->act->data.end());
      b->act->num_rows += part->act->num_rows;
    }
    return b;
  }

  RunContextPtr ctx_;
  engine::exec::Executor* exec_;
  int32_t block_, slot_;
  bool fifo_input_;  // InputRule::kFifo
  std::unique_ptr<ExpertKernel> kernel_;
  std::map<int64_t, TokenBatchPtr> queued_;  // kIteration: iteration → the barrier's batch
  BatchQueue fifo_;                          // kFifo: batches as they came
};

// ---------------------------------------------------------------------------------------------
class SamplerStage final : public StageImpl {
 public:
  SamplerStage(RunContextPtr ctx, engine::exec::Executor* exec, int32_t rank,
               int64_t residual_sources)
      : ctx_(std::move(ctx)),
        exec_(exec),
        rank_(rank),
        pool_(make_pool(*ctx_, exec->activation_width(), residual_sources)) {}

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

  int64_t ready_tokens() const override { return pool_.ready_tokens(); }

  absl::Status run(std::vector<Send>& out, RunInfo& info) override {
    absl::StatusOr<engine::dataflow::MergedTokens> merged =
        pool_.take_ready(ctx_->graph().max_batch_tokens);
    if (!merged.ok()) return merged.status();
    if (merged->tokens.empty()) return absl::OkStatus();
    const int64_t it = merged->iteration;
    info.iteration = it;
    info.num_tokens = static_cast<int64_t>(merged->tokens.size());
    info.num_requests = ctx_->trace ? count_requests(merged->tokens) : 0;
    const int64_t num_tokens = info.num_tokens;
    const int64_t H = exec_->activation_width();
    std::vector<TokenMeta> rows;
    std::vector<float> h;
    for (int64_t i = 0; i < num_tokens; ++i) {
      const TokenMeta& m = merged->tokens[i];
      if (!(m.flags & (engine::dataflow::kSample | engine::dataflow::kNeedsLogits))) continue;
      rows.push_back(m);
      h.insert(h.end(), merged->h.begin() + i * H, merged->h.begin() + (i + 1) * H);
    }
    std::vector<int32_t> tokens;
    std::vector<std::vector<float>> logits;
    exec_->sample(rows, h.data(), ctx_->request_sampling->for_rows(rows, ctx_->topology.sampling),
                  &tokens, &logits, &info.seconds);
    info.seconds =
        std::max(0.0, info.seconds + exec_->stage_host_seconds(StageKind::kSampler, num_tokens));
    auto report = std::make_shared<SampledBatch>();
    report->iteration = it;
    report->rank = rank_;
    for (const TokenMeta& m : merged->tokens) report->requests.push_back(m.request_id);
    std::sort(report->requests.begin(), report->requests.end());
    report->requests.erase(std::unique(report->requests.begin(), report->requests.end()),
                           report->requests.end());
    for (size_t r = 0; r < rows.size(); ++r) {
      SampledToken t;
      t.request_id = rows[r].request_id;
      t.position = rows[r].position;
      t.token = tokens[r];
      t.logits = std::move(logits[r]);
      report->rows.push_back(std::move(t));
    }
    out.push_back({ctx_->actors.coordinator, caf::make_message(sampled_atom::value, report)});
    return absl::OkStatus();
  }

  std::string name() const override { return absl::StrFormat("sampler r%d", rank_); }
  LayerId layer() const override {
    return {StageKind::kSampler, static_cast<int32_t>(ctx_->config.num_layers), rank_};
  }

 private:
  RunContextPtr ctx_;
  engine::exec::Executor* exec_;
  int32_t rank_;
  engine::dataflow::TokenPool pool_;
};

}  // namespace

std::shared_ptr<StageImpl> make_attention_stage(RunContextPtr ctx, engine::exec::Executor* exec,
                                                int32_t block, int32_t rank,
                                                int64_t residual_sources) {
  return std::make_shared<AttentionStage>(std::move(ctx), exec, block, rank, residual_sources);
}
std::shared_ptr<StageImpl> make_expert_stage(RunContextPtr ctx, engine::exec::Executor* exec,
                                             int32_t block, int32_t slot) {
  std::unique_ptr<ExpertKernel> kernel = ctx->wiring->expert_kernel(ctx, exec, block, slot);
  return std::make_shared<ExpertStage>(std::move(ctx), exec, block, slot, std::move(kernel));
}
std::shared_ptr<StageImpl> make_sampler_stage(RunContextPtr ctx, engine::exec::Executor* exec,
                                              int32_t rank, int64_t residual_sources) {
  return std::make_shared<SamplerStage>(std::move(ctx), exec, rank, residual_sources);
}

}  // namespace muflow::actors
