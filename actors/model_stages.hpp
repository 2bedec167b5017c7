#pragma once
/// \file
/// The three stage kinds (every backend: the math or the modeled time comes from the device's
/// engine::Executor): attention (per block and
/// DP rank), expert (per block and expert) and sampler (per DP rank). Each is a StageImpl
/// owned by one stage actor.

#include <memory>

#include "actors/stage.hpp"
#include "engine/executor.hpp"

namespace muflow::actors {

/// AttentionStage(block, rank): merges the previous block's expert outputs (token pool),
/// then RMSNorm, GQA attention with this rank's KV cache of `block`, residual, RMSNorm,
/// router top-k and shared expert; sends expert inputs to the block's dispatch all-to-all and
/// the residual rows to the next merge point on the same rank.
std::shared_ptr<StageImpl> make_attention_stage(RunContextPtr ctx, engine::Executor* exec,
                                                int32_t block, int32_t rank);

/// ExpertStage(block, slot): SwiGLU FFN over every token routed to it in one iteration;
/// outputs go to the block's combine all-to-all (async: point to point), one part per origin
/// rank. `slot` is an expert (sync, async) or a device (ctx->expert_mode kHarmoeny: the
/// experts of each segment of its batch, timed by the slot cache on sim; kMoeShard: this
/// device's shard of each segment's expert).
std::shared_ptr<StageImpl> make_expert_stage(RunContextPtr ctx, engine::Executor* exec,
                                             int32_t block, int32_t slot);

/// SamplerStage(rank): merges the last block's expert outputs, final RMSNorm, LM head and
/// sampling for the rows that need it; reports every iteration to the coordinator.
std::shared_ptr<StageImpl> make_sampler_stage(RunContextPtr ctx, engine::Executor* exec,
                                              int32_t rank);

}  // namespace muflow::actors
