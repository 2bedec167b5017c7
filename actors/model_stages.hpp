#pragma once
/// \file
/// The three stage kinds (every backend: the math or the modeled time comes from the device's
/// engine::exec::Executor): attention (per block and
/// DP rank), expert (per block and expert) and sampler (per DP rank). Each is a StageImpl
/// owned by one stage actor.

#include <memory>

#include "actors/stage.hpp"
#include "engine/exec/executor.hpp"

namespace muflow::actors {

/// AttentionStage(block, rank): merges the previous block's expert outputs (token pool, under
/// the graph's merge rule), then RMSNorm, GQA attention with the KV cache the wiring gives it,
/// residual, RMSNorm, router top-k and shared expert; sends expert inputs along the graph's
/// dispatch edge and each token's residual row to the merge point of its continuation rank
/// (one batch, possibly empty, to every residual target of this rank).
/// `residual_sources`: residual batches its merge point waits for per iteration
/// (WiringGraph::residual_sources()[rank]; unused in block 0).
std::shared_ptr<StageImpl> make_attention_stage(RunContextPtr ctx, engine::exec::Executor* exec,
                                                int32_t block, int32_t rank,
                                                int64_t residual_sources);

/// ExpertStage(block, slot): runs the wiring's ExpertKernel for the slot
/// (ctx->wiring->expert_kernel: one expert, or every expert segment a device was sent) over
/// its μ-queue's batch; outputs go to the block's combine (barrier or point to point, as the
/// graph says), one part per token's continuation rank.
std::shared_ptr<StageImpl> make_expert_stage(RunContextPtr ctx, engine::exec::Executor* exec,
                                             int32_t block, int32_t slot);

/// SamplerStage(rank): merges the last block's expert outputs, final RMSNorm, LM head and
/// sampling for the rows that need it; reports every iteration to the coordinator.
/// `residual_sources` as for make_attention_stage.
std::shared_ptr<StageImpl> make_sampler_stage(RunContextPtr ctx, engine::exec::Executor* exec,
                                              int32_t rank, int64_t residual_sources);

}  // namespace muflow::actors
