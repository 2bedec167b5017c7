#pragma once
/// \file
/// Deterministic random MoE models of any size, for tests, benchmarks and simulation.

#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/model/model_weights.hpp"

#include "engine/splitmix64.hpp"

namespace muflow::engine::model {

/// FNV-1a 64-bit hash of a string (for per-tensor seeds).
uint64_t fnv1a64(std::string_view text);

/// Fills `out` with `count` values uniform in [-a, a) with a = std·√3 (so the standard
/// deviation is `std`) plus `mean`, drawn from SplitMix64{seed ^ fnv1a64(name)}. Each
/// tensor has its own stream, so a tensor's values do not depend on the model's other dims
/// (layer 0 is the same whether the model has 2 or 20 layers, if its own shape is equal).
void fill_synthetic(std::string_view name, uint64_t seed, float mean, float std, int64_t count,
                    std::vector<float>* out);

/// A model with random weights in HF layout and names, deterministic in (config, seed).
///
/// Like HF init, linear weights, the embedding and biases have std 0.02 (uniform, not
/// normal); norm weights are 1 + uniform noise of std 0.01. One departure keeps routing
/// useful: the router (`gate`) has std 1/√hidden, so router logits of a normalised hidden
/// state have std ≈ 1 and tokens spread over the experts instead of nearly tying. LM-head
/// logits of a normalised state have std ≈ 0.02·√hidden (not all equal). Matrices (q, k, v, o, experts, shared expert, lm_head) are stored in
/// `matrix_dtype` (BF16 values are the F32 draws rounded to nearest even); vectors, embed,
/// router and shared_expert_gate are always F32, as `load_hf_model` returns them, so
/// write → load reproduces the model exactly. With tie_word_embeddings, lm_head is a copy of
/// embed.
///
/// Precondition: `config.validate().ok()` (asserted; validate user input first).
/// Thread-safe (no shared state). Memory: the full model is materialised on the host.
ModelWeights make_synthetic_model(const ModelConfig& config, uint64_t seed, DType matrix_dtype);

}  // namespace muflow::engine::model
