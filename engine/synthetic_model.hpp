#pragma once
/// \file
/// Deterministic random MoE models of any size, for tests, benchmarks and simulation.

#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/model_weights.hpp"

namespace muflow::engine {

/// splitmix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014; constants as in Vigna's public-domain reference). Portable and exact on
/// every compiler and standard library, unlike the std:: distributions.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [-1, 1): the top 24 bits mapped to a float grid of step 2^-23 (exact).
  float uniform_pm1() { return static_cast<float>(next() >> 40) * (1.0f / 8388608.0f) - 1.0f; }
};

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

}  // namespace muflow::engine
