#pragma once
/// \file
/// Next-token sampling: greedy, or seeded temperature / top-p sampling whose random draw
/// depends only on (seed, request id, position), never on batching or wiring.

#include <cstdint>

#include "engine/topology/topology.hpp"

namespace muflow::engine::serving {

/// Picks the next token from `logits` [vocab] f32.
///
/// temperature == 0: argmax, ties → lowest id. Otherwise p = softmax(logits / temperature)
/// (in double), restricted to the smallest prefix of ids sorted by descending p (ties → lower
/// id) whose mass reaches `top_p`, and sampled by inverse CDF with
/// u = counter_uniform(seed, key_by_request ? request_id : 0, position) ∈ [0, 1). Pure and
/// thread-safe.
int32_t sample_token(const float* logits, int64_t vocab, const topology::SamplingSpec& sampling,
                     int64_t request_id, int64_t position);

/// A uniform double in [0, 1) from a counter-based hash (splitmix64 finaliser applied to the
/// three inputs), so draws are reproducible and independent of call order.
double counter_uniform(uint64_t seed, uint64_t a, uint64_t b);

}  // namespace muflow::engine::serving
