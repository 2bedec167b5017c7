#pragma once
/// \file
/// The single-device reference path: one request decoded alone, layer after layer, with no
/// actors and no batching. Every wiring must produce exactly its tokens (invariant 1).

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/exec/cpu_model.hpp"
#include "engine/serving/request.hpp"
#include "engine/topology/topology.hpp"

namespace muflow::engine::exec {

/// Output of reference_generate.
struct ReferenceResult {
  std::vector<int32_t> output_ids;   ///< generated tokens (EOS included when it stops there)
  std::vector<float> prompt_logits;  ///< [prompt_len, vocab] when requested, else empty
  /// Expert choices [num_layers][num_positions * num_topk] of every position computed
  /// (prompt then generated), for invariance checks on routing.
  std::vector<std::vector<int32_t>> expert_ids;
};

/// Prefills the whole prompt in one batch, then decodes one token at a time until
/// `request.max_new_tokens` tokens, EOS (when sampling.stop_at_eos), or the next position
/// reaching max_position_embeddings. Same combine order and sampling as the actors. Errors:
/// InvalidArgument for an empty prompt or a token id outside [0, vocab); FailedPrecondition
/// from the KV cache (an internal inconsistency). Unlike Server::run it does not reject prompts
/// of max_position_embeddings tokens or more. Thread-safe (own KV caches).
absl::StatusOr<ReferenceResult> reference_generate(const CpuModel& model,
                                                   const serving::Request& request,
                                                   const topology::SamplingSpec& sampling,
                                                   bool want_prompt_logits);

}  // namespace muflow::engine::exec
