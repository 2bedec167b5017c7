#pragma once
/// \file
/// Incremental detokenization with stop strings: the text a streaming response may send after
/// each generated token, holding back bytes that could still become a stop string or complete
/// a UTF-8 character.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace muflow::http {

/// Turns generated token ids into text deltas.
///
/// After each push, the text so far is `decode(ids)` (the whole output decoded at once, so
/// pieces that merge across tokens — SentencePiece's leading "▁", byte-fallback UTF-8 — come
/// out as `muflow generate` prints them). A delta is released only when it can no longer
/// change: a trailing U+FFFD (an incomplete UTF-8 sequence of byte-fallback pieces) and any
/// suffix that is a prefix of a stop string are held back. When a stop string appears, the
/// text ends right before it (OpenAI: the stop sequence is not included) and `stopped()`
/// turns true. Cost per push: one decode of the whole output (O(n) per token, O(n²) per
/// request; outputs are bounded by max_tokens). Single owner; not thread-safe.
class TextStream {
 public:
  /// `decode`: ids → text (e.g. Tokenizer::decode). `stop`: non-empty stop strings.
  TextStream(std::function<std::string(const std::vector<int32_t>&)> decode,
             std::vector<std::string> stop);

  /// Adds one generated token; returns the text newly released (possibly empty). After
  /// stopped(), pushes are ignored and return "".
  std::string push(int32_t token);
  /// At the end of generation: the held-back text (no stop string can complete any more).
  std::string flush();
  /// A stop string was found; text() ends before it.
  bool stopped() const { return stopped_; }
  /// The text released so far.
  const std::string& text() const { return released_; }
  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  std::function<std::string(const std::vector<int32_t>&)> decode_;
  std::vector<std::string> stop_;
  std::vector<int32_t> ids_;
  std::string released_;
  bool stopped_ = false;
};

}  // namespace muflow::http
