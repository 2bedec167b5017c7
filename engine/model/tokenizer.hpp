#pragma once
/// \file
/// Text ⇄ token ids with a SentencePiece model (`tokenizer.model` of an HF model folder).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace muflow::engine::model {

/// A loaded SentencePiece tokenizer (e.g. the kjv-mixtral-tiny BPE model: 4096 pieces,
/// unk 0, bos 1, eos 2, byte fallback). Prompt format of the HF Llama/Mixtral tokenizers
/// (`add_bos_token: true`, `add_eos_token: false`): `[bos] + sentencepiece.encode(text)`.
///
/// Immutable after `load`; `encode`/`decode` and the accessors are const and may be called
/// concurrently from any thread (SentencePieceProcessor's const methods share no mutable
/// state). Owned by its creator through `std::unique_ptr`.
class Tokenizer {
 public:
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  /// Loads a SentencePiece model file.
  /// Errors: NotFound "<path>: tokenizer model not found"; InvalidArgument
  /// "<path>: not a SentencePiece model: <reason>" for an unreadable or corrupt file.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> load(const std::string& model_path);

  /// Loads `<dir>/tokenizer.model`. Errors: NotFound "<dir>: no tokenizer.model in the model
  /// folder" when absent (callers may fall back to raw ids); otherwise as `load`.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> load_from_model_dir(const std::string& dir);

  /// Token ids of `text` (UTF-8; invalid bytes are handled by SentencePiece's byte fallback
  /// or mapped to unk), with `bos_id()` prepended when `add_bos` and the model has a BOS
  /// piece. Never appends EOS. Ids are in [0, vocab_size()).
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const;

  /// Text of `ids`. Control pieces (bos, eos) decode to nothing, as in HF with
  /// `skip_special_tokens`. An id outside [0, vocab_size()) is not dropped: it is rendered
  /// as the visible marker "<invalid-token:ID>".
  std::string decode(const std::vector<int32_t>& ids) const;

  /// Number of pieces (ids are 0 .. vocab_size()-1).
  int32_t vocab_size() const;
  /// Id of the BOS / EOS / unk piece, or -1 when the model has none.
  int32_t bos_id() const;
  int32_t eos_id() const;
  int32_t unk_id() const;
  /// The piece string of one id (e.g. "▁the"), or "<invalid-token:ID>" when out of range.
  std::string id_to_piece(int32_t id) const;

 private:
  Tokenizer();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace muflow::engine::model
