#pragma once
/// \file
/// What a real backend's Executor::sample does once its LM head has produced the logits.

#include <cstdint>
#include <vector>

#include "engine/dataflow/token_batch.hpp"
#include "engine/topology/topology.hpp"

namespace muflow::engine::exec {

/// From `all_logits` ([rows.size(), vocab] f32, row-major, host memory): tokens[i] = the next
/// token after rows[i] (serving::sample_token at position + 1) where rows[i] asks for kSample,
/// else -1; logits[i] = row i's logits where it asks for kNeedsLogits, else empty.
/// sampling.size() == rows.size() (aborts otherwise). Any thread.
void sample_rows(const std::vector<dataflow::TokenMeta>& rows, const float* all_logits,
                 int64_t vocab, const std::vector<topology::SamplingSpec>& sampling,
                 std::vector<int32_t>* tokens, std::vector<std::vector<float>>* logits);

}  // namespace muflow::engine::exec
