#pragma once
/// \file
/// Incremental detokenization with stop strings: the text a streaming response may send after
/// each generated token, holding back bytes that could still become a stop string or complete
/// a UTF-8 character.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace muflow::engine::model {

/// Turns generated token ids into text deltas.
///
/// Windowed decoding, as vLLM's incremental detokenizer (prefix and read offsets;
/// vllm/transformers_utils/detokenizer_utils.py): each push decodes only the tokens since the
/// last released piece plus the one before, starting from the prompt's last tokens
/// (`context`), so a leading "▁" decodes to the space it is after the prompt and pieces that
/// merge across tokens (byte-fallback UTF-8) come out whole. A piece ending in U+FFFD (an
/// incomplete UTF-8 sequence) waits for the next token. Released text then passes a stop-string
/// filter: a suffix that is a prefix of a stop string is held back; when a stop string appears,
/// the text ends right before it (OpenAI: the stop sequence is not included) and stopped()
/// turns true. Cost per push: two decodes of a few tokens. Single owner; not thread-safe.
class TextStream {
 public:
  /// `decode`: ids → text (e.g. Tokenizer::decode). `context`: the prompt's last few ids
  /// (may be empty). `stop`: stop strings (empty ones are ignored).
  TextStream(std::function<std::string(const std::vector<int32_t>&)> decode,
             std::vector<int32_t> context, std::vector<std::string> stop);

  /// Adds one generated token; returns the text newly released (possibly empty). After
  /// stopped(), pushes are ignored and return "".
  std::string push(int32_t token);
  /// At the end of generation: the held-back text (no stop string can complete any more).
  std::string flush();
  /// A stop string was found; text() ends before it.
  bool stopped() const { return stopped_; }
  /// The text released so far.
  const std::string& text() const { return released_; }
  /// What flush() would add now (held-back text, an incomplete character at the end), without
  /// releasing it.
  std::string held() const;
  /// The generated ids pushed (up to and including the one that completed a stop string).
  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  std::string decode_range(size_t begin, size_t end) const;
  /// Moves what the stop-string filter lets through from pending_ to released_; returns it.
  std::string release();

  std::function<std::string(const std::vector<int32_t>&)> decode_;
  std::vector<std::string> stop_;
  std::vector<int32_t> all_;                    ///< context, then generated ids
  std::vector<int32_t> ids_;                    ///< generated ids
  size_t prefix_offset_ = 0, read_offset_ = 0;  ///< into all_
  std::string pending_;                         ///< decoded, held back by the stop-string filter
  std::string released_;
  bool stopped_ = false;
};

}  // namespace muflow::engine::model
