#pragma once
/// \file
/// Incremental parser of a `text/event-stream` body (server-sent events): bytes in, events
/// out, in pieces of any size.
///
/// Source: WHATWG HTML Living Standard, §9.2.6 "Interpreting an event stream" (line ends CRLF,
/// LF or CR; `field: value` with one leading space of the value dropped; `data` lines joined
/// with "\n"; a line starting with ':' is a comment; a blank line dispatches the event; an
/// event whose data buffer is empty is not dispatched; an unterminated event at the end of
/// the stream is discarded; one leading UTF-8 BOM is skipped). `retry` and unknown fields are
/// ignored; `id` is kept verbatim (a value containing NUL is ignored, as the standard says).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace muflow::http::client {

/// One dispatched event.
struct SseEvent {
  std::string event;  ///< the `event:` field; empty = the default type "message"
  std::string data;   ///< the `data:` lines joined with "\n" (no trailing "\n")
  std::string id;     ///< the last `id:` field seen so far in the stream (persists)
};

/// Bounds that keep a misbehaving server from growing the parser's memory without limit.
struct SseLimits {
  int64_t max_line_bytes = 1 << 20;   ///< longest line (without its line end), bytes
  int64_t max_event_bytes = 4 << 20;  ///< largest data buffer of one event, bytes
};

/// Parser state of one stream. Single owner, any one thread at a time (no locking); one
/// parser per response body.
class SseParser {
 public:
  explicit SseParser(SseLimits limits = {});

  /// Consumes `bytes` (any split of the stream: a line end may be cut between two calls,
  /// including CR | LF) and appends every event completed by them to `*events`.
  /// Errors: ResourceExhausted "server-sent event line longer than N bytes" or "server-sent
  /// event data larger than N bytes" when a limit is crossed; after an error the parser
  /// stays failed and every later call returns the same error (events appended before the
  /// failure stay in `*events`).
  absl::Status feed(std::string_view bytes, std::vector<SseEvent>* events);

  /// True when bytes of an event (or of a line) were read that no blank line has
  /// dispatched yet: at the end of the stream they are discarded (the event was cut off).
  bool has_partial_event() const;

  /// Bytes consumed so far (for messages).
  int64_t bytes_consumed() const { return bytes_consumed_; }

 private:
  absl::Status process_line(std::string_view line, std::vector<SseEvent>* events);
  absl::Status fail(absl::Status status);

  SseLimits limits_;
  absl::Status error_;
  std::string line_;        // the line being read (without its line end)
  bool after_cr_ = false;   // the previous byte was CR: a following LF belongs to it
  bool first_line_ = true;  // a leading UTF-8 BOM is dropped from the first line
  std::string data_;        // data buffer of the event being built
  bool has_data_ = false;   // at least one data line (data_ may be legitimately empty)
  std::string event_type_;
  std::string last_id_;
  bool event_started_ = false;  // a non-comment field line was read since the last dispatch
  int64_t bytes_consumed_ = 0;
};

}  // namespace muflow::http::client
