#pragma once
/// \file
/// The message unit of the dataflow: a batch of token records plus an activation handle
/// (ARCHITECTURE.md §2; token metadata after AsyncMoE Table 1).

#include <cstdint>
#include <memory>
#include <vector>

namespace muflow::engine::dataflow {

/// Which kind of stage a layer id names.
enum class StageKind : int8_t { kAttention, kExpert, kSampler };

/// A layer id: block + expert (expert stage), or block + attention data-parallel rank
/// (attention stage, sampler stage; the sampler uses block = num_layers).
struct LayerId {
  StageKind kind = StageKind::kAttention;
  int32_t block = 0;
  int32_t index = 0;  ///< expert id (kExpert) or DP rank (kAttention, kSampler)
};

/// Metadata of one token row. Which fields matter depends on the hop:
/// dispatch rows (attention → expert) carry `topk_rank`/`topk_weight`; combine rows carry the
/// same so the receiver can place the output in its top-k slot.
/// Fields are ordered by size so a row is 40 bytes, not 48 (every routed row is copied at
/// each hop; the wire order is fixed separately, transport/token_batch_wire.hpp).
struct TokenMeta {
  int64_t request_id = 0;
  int64_t position = 0;     ///< position in the request's sequence (0-based)
  int64_t wave = 0;         ///< async: id of the attention run that emitted it (merge group)
  int32_t token_id = -1;    ///< input token id (only on the coordinator → block 0 hop)
  int32_t origin_rank = 0;  ///< attention DP rank that owns the token's KV cache (combine target)
  float topk_weight = 0.f;  ///< router weight of that expert (after renormalisation if any)
  int16_t topk_rank = 0;    ///< 0..num_topk-1: which of the token's top-k experts this row is for
  uint8_t flags = 0;        ///< kNeedsLogits etc.
};
static_assert(sizeof(TokenMeta) == 40, "TokenMeta: keep the fields ordered by size");

/// TokenMeta::flags bits.
inline constexpr uint8_t kNeedsLogits = 1;  ///< sampler must return this row's logits
inline constexpr uint8_t kSample = 2;       ///< sampler must sample the next token from this row

/// Row-major float32 activations `[num_rows, width]`, passed between actors by handle
/// (`std::shared_ptr`), never copied into messages. Owned by whoever holds the last handle.
struct Activations {
  int64_t num_rows = 0;
  int64_t width = 0;
  std::vector<float> data;  ///< num_rows * width

  Activations() = default;
  Activations(int64_t rows, int64_t cols) : num_rows(rows), width(cols), data(rows * cols) {}
  float* row(int64_t r) { return data.data() + r * width; }
  const float* row(int64_t r) const { return data.data() + r * width; }
};

/// What the rows of a TokenBatch are.
enum class Payload : int8_t {
  kTokenIds,       ///< coordinator → block 0: token ids only, no activations
  kResidual,       ///< attention(b) → merge point of block b: [h_mid | shared] rows
  kExpertInputs,   ///< dispatch: attention(b) → expert(b, e): normed hidden rows
  kExpertOutputs,  ///< combine: expert(b, e) → merge point: expert output rows
};

/// Rows [begin, end) of a batch that are all for `expert` (batches of per-device expert
/// stages, which run several experts: HarMoEny, MoEShard).
struct ExpertSegment {
  int32_t expert = 0;
  int64_t begin = 0;
  int64_t end = 0;

  friend bool operator==(const ExpertSegment&, const ExpertSegment&) = default;
};

/// A batch of tokens for one layer in one iteration: `tokens.size()` records and, when the
/// hop carries hidden states, `act` with `act->num_rows == tokens.size()` (row i ↔ tokens[i]).
/// In simulation `act` is null (metadata only).
struct TokenBatch {
  LayerId layer;           ///< destination layer
  Payload payload = Payload::kTokenIds;
  int64_t iteration = 0;   ///< coordinator's iteration (decode step) number
  std::vector<TokenMeta> tokens;
  std::shared_ptr<Activations> act;
  /// Expert inputs for a per-device expert stage: the rows grouped by expert, segments in
  /// ascending expert order covering every row once (empty segments are left out). Empty
  /// for a per-expert stage, whose rows are all for expert `layer.index`.
  std::vector<ExpertSegment> segments;

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
};

using TokenBatchPtr = std::shared_ptr<TokenBatch>;

/// A new empty batch for `layer` carrying `payload` in `iteration`, with activations of
/// `width` floats per row (0 in simulation; `act` is never null) and room reserved for `rows`
/// rows (>= 0) of tokens and activations, so that appending them allocates nothing more.
inline TokenBatchPtr make_batch(LayerId layer, Payload payload, int64_t iteration, int64_t width,
                                int64_t rows = 0) {
  auto b = std::make_shared<TokenBatch>();
  b->layer = layer;
  b->payload = payload;
  b->iteration = iteration;
  b->act = std::make_shared<Activations>(0, width);
  if (rows > 0) {
    b->tokens.reserve(static_cast<size_t>(rows));
    b->act->data.reserve(static_cast<size_t>(rows * width));
  }
  return b;
}

}  // namespace muflow::engine::dataflow
