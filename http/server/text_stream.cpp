#include "http/server/text_stream.hpp"

#include <algorithm>

namespace muflow::http {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

TextStream::TextStream(std::function<std::string(const std::vector<int32_t>&)> decode,
                       std::vector<std::string> stop)
    : decode_(std::move(decode)), stop_(std::move(stop)) {
  stop_.erase(std::remove(stop_.begin(), stop_.end(), std::string()), stop_.end());
}

std::string TextStream::push(int32_t token) {
  if (stopped_) return "";
  ids_.push_back(token);
  const std::string full = decode_(ids_);
  // The decoded text may rewrite its tail (a byte-fallback character completes); it never
  // rewrites what was released, except where the released part was itself an incomplete
  // character, which is held back below.
  if (full.compare(0, released_.size(), released_) != 0) return "";
  // Earliest stop string in the unreleased text (a match may start inside held-back text).
  size_t cut = std::string::npos;
  for (const std::string& s : stop_) {
    const size_t from = released_.size() >= s.size() ? released_.size() - s.size() + 1 : 0;
    const size_t at = full.find(s, from);
    if (at != std::string::npos && at >= released_.size()) cut = std::min(cut, at);
  }
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string delta = full.substr(released_.size(), cut - released_.size());
    released_ += delta;
    return delta;
  }
  size_t keep = full.size();
  if (ends_with(full, kReplacement)) keep -= kReplacement.size();
  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const std::string& s : stop_) {
    for (size_t len = std::min(s.size() - 1, keep); len > hold; --len) {
      if (std::string_view(full).substr(keep - len, len) == std::string_view(s).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  keep -= hold;
  if (keep <= released_.size()) return "";
  std::string delta = full.substr(released_.size(), keep - released_.size());
  released_ += delta;
  return delta;
}

std::string TextStream::flush() {
  if (stopped_) return "";
  const std::string full = decode_(ids_);
  if (full.size() <= released_.size() || full.compare(0, released_.size(), released_) != 0) {
    return "";
  }
  std::string delta = full.substr(released_.size());
  released_ = full;
  return delta;
}

}  // namespace muflow::http
