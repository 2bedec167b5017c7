#include "http/client/sse_parser.hpp"

#include "absl/strings/str_format.h"

namespace muflow::http::client {
namespace {
constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";
}  // namespace

SseParser::SseParser(SseLimits limits) : limits_(limits) {}

absl::Status SseParser::fail(absl::Status status) {
  error_ = std::move(status);
  return error_;
}

absl::Status SseParser::feed(std::string_view bytes, std::vector<SseEvent>* events) {
  if (!error_.ok()) return error_;
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (after_cr_) {  // CR LF cut between two calls, or CR LF inside this one
      after_cr_ = false;
      if (bytes[pos] == '\n') {
        ++pos;
        ++bytes_consumed_;
        continue;
      }
    }
    const size_t end = bytes.find_first_of("\r\n", pos);
    const size_t stop = end == std::string_view::npos ? bytes.size() : end;
    if (static_cast<int64_t>(line_.size() + (stop - pos)) > limits_.max_line_bytes) {
      return fail(absl::ResourceExhaustedError(
          absl::StrFormat("server-sent event line longer than %d bytes (at byte %d of the stream)",
                          limits_.max_line_bytes, bytes_consumed_)));
    }
    line_.append(bytes.data() + pos, stop - pos);
    bytes_consumed_ += static_cast<int64_t>(stop - pos);
    if (end == std::string_view::npos) break;
    after_cr_ = bytes[end] == '\r';
    ++bytes_consumed_;
    pos = end + 1;
    absl::Status s = process_line(line_, events);
    line_.clear();
    if (!s.ok()) return fail(std::move(s));
  }
  return absl::OkStatus();
}

absl::Status SseParser::process_line(std::string_view line, std::vector<SseEvent>* events) {
  if (first_line_) {
    first_line_ = false;
    if (line.substr(0, kUtf8Bom.size()) == kUtf8Bom) line.remove_prefix(kUtf8Bom.size());
  }
  if (line.empty()) {  // dispatch
    if (has_data_) events->push_back(SseEvent{event_type_, data_, last_id_});
    data_.clear();
    has_data_ = false;
    event_type_.clear();
    event_started_ = false;
    return absl::OkStatus();
  }
  if (line.front() == ':') return absl::OkStatus();  // comment (keep-alive pings)
  std::string_view field = line, value;
  if (const size_t colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  event_started_ = true;
  if (field == "data") {
    const size_t grown = data_.size() + (has_data_ ? 1 : 0) + value.size();
    if (static_cast<int64_t>(grown) > limits_.max_event_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("server-sent event data larger than %d bytes (at byte %d of the stream)",
                          limits_.max_event_bytes, bytes_consumed_));
    }
    if (has_data_) data_.push_back('\n');
    data_.append(value);
    has_data_ = true;
  } else if (field == "event") {
    event_type_ = std::string(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) last_id_ = std::string(value);
  }
  // `retry` and unknown fields: ignored.
  return absl::OkStatus();
}

bool SseParser::has_partial_event() const { return !line_.empty() || event_started_; }

}  // namespace muflow::http::client
