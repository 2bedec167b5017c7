#pragma once
/// \file
/// Upper bounds on model dimensions read from user files (config.json, topology `[model]`,
/// `muflow make-model`), checked before anything is allocated for them (#15). Each is far above
/// every public MoE model (largest seen: vocab 256k, hidden 18,432, 128 layers, 256 routed
/// experts, expert ffn 28,672), so a bound only ever rejects a typo or a hostile file.

#include <cstdint>

namespace muflow::engine::model {

inline constexpr int64_t kMaxVocab = int64_t{1} << 22;         ///< token ids stay < 2^31
inline constexpr int64_t kMaxHidden = int64_t{1} << 16;
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxHeads = 1024;                     ///< attention and KV heads
inline constexpr int64_t kMaxHeadDim = 1024;
inline constexpr int64_t kMaxExperts = 4096;
inline constexpr int64_t kMaxFfn = int64_t{1} << 18;           ///< expert and shared-expert ffn
inline constexpr int64_t kMaxPositions = int64_t{1} << 24;     ///< max_position_embeddings

}  // namespace muflow::engine::model
