#include "engine/model/text_stream.hpp"

#include <algorithm>
#include <string_view>

namespace muflow::engine::model {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

TextStream::TextStream(std::function<std::string(const std::vector<int32_t>&)> decode,
                       std::vector<int32_t> context, std::vector<std::string> stop)
    : decode_(std::move(decode)), stop_(std::move(stop)), all_(std::move(context)) {
  stop_.erase(std::remove(stop_.begin(), stop_.end(), std::string()), stop_.end());
  read_offset_ = all_.size();
}

std::string TextStream::decode_range(size_t begin, size_t end) const {
  return decode_(std::vector<int32_t>(all_.begin() + static_cast<std::ptrdiff_t>(begin),
                                      all_.begin() + static_cast<std::ptrdiff_t>(end)));
}

std::string TextStream::push(int32_t token) {
  if (stopped_) return "";
  all_.push_back(token);
  ids_.push_back(token);
  const std::string prefix_text = decode_range(prefix_offset_, read_offset_);
  const std::string new_text = decode_range(prefix_offset_, all_.size());
  if (new_text.size() > prefix_text.size() && !ends_with(new_text, kReplacement)) {
    pending_ += new_text.substr(prefix_text.size());
    prefix_offset_ = read_offset_;
    read_offset_ = all_.size();
  }
  return release();
}

std::string TextStream::release() {
  // Earliest stop string in the pending text. None can start in released text: a released
  // suffix is never a prefix of a stop string (held back below).
  size_t cut = std::string::npos;
  for (const std::string& s : stop_) cut = std::min(cut, pending_.find(s));
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string delta = pending_.substr(0, cut);
    released_ += delta;
    pending_.clear();
    return delta;
  }
  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const std::string& s : stop_) {
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (std::string_view(pending_).substr(pending_.size() - len) ==
          std::string_view(s).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  std::string delta = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  released_ += delta;
  return delta;
}

std::string TextStream::held() const {
  if (stopped_) return "";
  const std::string prefix_text = decode_range(prefix_offset_, read_offset_);
  const std::string new_text = decode_range(prefix_offset_, all_.size());
  return new_text.size() > prefix_text.size() ? pending_ + new_text.substr(prefix_text.size())
                                              : pending_;
}

std::string TextStream::flush() {
  if (stopped_) return "";
  const std::string prefix_text = decode_range(prefix_offset_, read_offset_);
  const std::string new_text = decode_range(prefix_offset_, all_.size());
  if (new_text.size() > prefix_text.size()) pending_ += new_text.substr(prefix_text.size());
  prefix_offset_ = read_offset_ = all_.size();
  std::string delta = pending_;
  released_ += delta;
  pending_.clear();
  return delta;
}

}  // namespace muflow::engine::model
