#pragma once
/// \file
/// `exflow` (ExFlow §IV-A, context-coherent EP): sync's actors and barriers, but every DP rank
/// sees every request's KV cache, so a request with one token in the batch (a decode step, or
/// a one-token prefill chunk) continues (next attention, or the sampler) on the rank of the
/// device that ran its top-1 expert instead of returning home; a request with several tokens
/// in the batch stays home, since its tokens attend to each other within the block. The
/// combine then only moves the other top-k outputs. Costs: every rank sends every rank a
/// residual batch per block and iteration (R² messages, most empty), and each rank's new K/V
/// rows of a block go to every other rank (ExFlow's all-gather): every attention stage owns a
/// replica of every request's KV cache of its block, kept equal by `kvrows` messages
/// (WiringGraph::kv_replicated; on sim the bytes are charged with the dispatch all-to-all).
/// The barrier pacing keeps the replicas in position order: a request's tokens of one
/// iteration run on one rank, and its rows reach every replica before the next iteration.
/// With `experts = "affinity"` (ExFlow's inter-layer affinity placement) the expert stages of
/// each block follow that block's map.

#include "actors/wirings/wiring.hpp"

namespace muflow::actors {

/// The `exflow` wiring: one immutable static instance (any thread); the registry hands it out.
const Wiring& exflow_wiring();

}  // namespace muflow::actors
