#pragma once
/// \file
/// Message vocabulary between muflow's actors (CAF 0.17 atoms and local-only payload types).
/// Tensors travel by handle inside TokenBatch (ARCHITECTURE.md §8, invariant 4): every type
/// here is process-local and marked as such.

#include <caf/all.hpp>
#include <cstdint>
#include <memory>
#include <vector>

#include "actors/contribution.hpp"
#include "engine/dataflow/token_batch.hpp"
#include "engine/serving/request.hpp"

namespace muflow::actors {

// Device ↔ stage.
using ready_atom = caf::atom_constant<caf::atom("ready")>;  ///< stage → device: queued tokens
using grant_atom = caf::atom_constant<caf::atom("grant")>;  ///< device → stage: run now
using done_atom = caf::atom_constant<caf::atom("done")>;    ///< stage → device: finished
// Dataflow.
using batch_atom = caf::atom_constant<caf::atom("batch")>;      ///< a TokenBatch for a μ-queue
using contrib_atom = caf::atom_constant<caf::atom("contrib")>;  ///< rank → collective part
using release_atom = caf::atom_constant<caf::atom("release")>;  ///< free a request's KV cache
using kv_atom = caf::atom_constant<caf::atom("kv")>;  ///< host → stage: KV bytes held (reply)
using depth_atom = caf::atom_constant<caf::atom("depth")>;    ///< host → stage: μ-queue tokens
using kvrows_atom = caf::atom_constant<caf::atom("kvrows")>;  ///< attention → replica: K/V rows
// Coordinator.
using sampled_atom = caf::atom_constant<caf::atom("sampled")>;  ///< sampler → coordinator
using busy_atom = caf::atom_constant<caf::atom("busy")>;        ///< device → coordinator
using load_atom = caf::atom_constant<caf::atom("load")>;        ///< dispatch → coordinator
using layer_atom = caf::atom_constant<caf::atom("layer")>;      ///< combine → coordinator
using fetch_atom = caf::atom_constant<caf::atom("fetch")>;      ///< expert slots → coordinator
using a2a_atom = caf::atom_constant<caf::atom("a2a")>;          ///< all-to-all transfer time
using rows_atom = caf::atom_constant<caf::atom("a2arows")>;     ///< all-to-all rows, off-device
using wake_atom = caf::atom_constant<caf::atom("wake")>;        ///< next arrival due
/// coordinator → collectives: (iteration, ascending DP ranks taking part) under sparse
/// iterations (RunContext::sparse_iterations)
using ranks_atom = caf::atom_constant<caf::atom("ranks")>;
using start_atom = caf::atom_constant<caf::atom("start")>;
using submit_atom = caf::atom_constant<caf::atom("submit")>;  ///< host → coordinator: requests
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;  ///< host → coordinator
/// host → coordinator: cancel every unfinished request, make no more from the source
using cancel_all_atom = caf::atom_constant<caf::atom("cancelall")>;
using drain_atom = caf::atom_constant<caf::atom("drain")>;    ///< host → coordinator: outcome
using stats_atom = caf::atom_constant<caf::atom("stats")>;    ///< host → coordinator: EngineStats
using finish_atom = caf::atom_constant<caf::atom("finish")>;  ///< virtual time: run ends
using failed_atom = caf::atom_constant<caf::atom("failed")>;  ///< any actor → coordinator

/// One sampled (or logits-only) row reported by a sampler stage.
struct SampledToken {
  int64_t request_id = 0;
  int64_t position = 0;       ///< position of the input row that produced it
  int32_t token = -1;         ///< sampled next token, -1 for rows that only return logits
  std::vector<float> logits;  ///< [vocab] when the row asked for logits, else empty
};

/// All rows a sampler produced in one iteration.
struct SampledBatch {
  int64_t iteration = 0;
  int32_t rank = 0;
  std::vector<SampledToken> rows;
  /// Every request whose tokens passed the sampler in this run (ascending), including
  /// prefill chunks that sample nothing: the barrier-free coordinator feeds them next.
  std::vector<int64_t> requests;
};
using SampledBatchPtr = std::shared_ptr<SampledBatch>;

/// K/V rows one attention stage appended to its KV cache in one run, for the replicas of the
/// same block on other ranks (WiringGraph::kv_replicated; ExFlow's all-gather).
struct KvRows {
  int64_t width = 0;                 ///< floats per K (and V) row: num_kv_heads · head_dim
  std::vector<int64_t> request_ids;  ///< [n]
  std::vector<int64_t> positions;    ///< [n]
  std::vector<float> k, v;           ///< [n, width] each (empty in simulation: width 0)
};
using KvRowsPtr = std::shared_ptr<const KvRows>;

}  // namespace muflow::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(muflow::engine::dataflow::TokenBatchPtr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(muflow::actors::SampledBatchPtr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(muflow::actors::ContributionPtr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(muflow::actors::KvRowsPtr)
