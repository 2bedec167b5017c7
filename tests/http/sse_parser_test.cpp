// The server-sent events parser: every split of a stream gives the same events; line ends,
// comments, multi-line data, BOM, ids; oversize lines and events are rejected with a clear
// error and the parser stays failed.

#include "http/client/sse_parser.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace muflow::http::client {
namespace {

using ::testing::HasSubstr;

std::vector<SseEvent> parse_all(const std::string& stream, SseLimits limits = {}) {
  SseParser p(limits);
  std::vector<SseEvent> events;
  EXPECT_TRUE(p.feed(stream, &events).ok());
  return events;
}

// Feeds `stream` cut at `cuts` (sorted byte offsets) and returns the events.
std::vector<SseEvent> parse_split(const std::string& stream, const std::vector<size_t>& cuts) {
  SseParser p;
  std::vector<SseEvent> events;
  size_t begin = 0;
  for (size_t c : cuts) {
    EXPECT_TRUE(p.feed(std::string_view(stream).substr(begin, c - begin), &events).ok());
    begin = c;
  }
  EXPECT_TRUE(p.feed(std::string_view(stream).substr(begin), &events).ok());
  return events;
}

void expect_same(const std::vector<SseEvent>& got, const std::vector<SseEvent>& want,
                 const std::string& context) {
  ASSERT_EQ(got.size(), want.size()) << context;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].data, want[i].data) << context << " event " << i;
    EXPECT_EQ(got[i].event, want[i].event) << context << " event " << i;
    EXPECT_EQ(got[i].id, want[i].id) << context << " event " << i;
  }
}

// A stream like `muflow serve`'s, with every feature the parser handles: CRLF, lone CR and LF
// line ends, a comment, a multi-line event, an event type, an id, a field without a colon.
const std::string kMixedStream =
    "\xEF\xBB\xBF"
    ": keep-alive\r\n"
    "data: {\"choices\":[{\"text\":\"In\"}]}\r\n\r\n"
    "data:{\"choices\":[{\"text\":\" the\"}]}\n\n"
    "event: note\rid: 7\rdata: line one\rdata:  line two\r\r"
    "data\n\n"
    "retry: 100\nunknown: x\n\n"
    "data: [DONE]\n\n";

std::vector<SseEvent> mixed_expected() {
  return {
      {"", "{\"choices\":[{\"text\":\"In\"}]}", ""},
      {"", "{\"choices\":[{\"text\":\" the\"}]}", ""},
      {"note", "line one\n line two", "7"},
      {"", "", "7"},  // "data" alone: an empty data line dispatches an empty event
      {"", "[DONE]", "7"},
  };
}

TEST(SseParser, ParsesLineEndsCommentsMultilineDataAndIds) {
  expect_same(parse_all(kMixedStream), mixed_expected(), "whole stream");
}

TEST(SseParser, EverySingleSplitGivesTheSameEvents) {
  const std::vector<SseEvent> want = mixed_expected();
  for (size_t cut = 0; cut <= kMixedStream.size(); ++cut) {
    expect_same(parse_split(kMixedStream, {cut}), want, "cut at " + std::to_string(cut));
  }
}

TEST(SseParser, ByteByByteGivesTheSameEvents) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < kMixedStream.size(); ++i) cuts.push_back(i);
  expect_same(parse_split(kMixedStream, cuts), mixed_expected(), "byte by byte");
}

TEST(SseParser, EveryPairOfSplitsGivesTheSameEvents) {
  const std::string stream =
      "data: a\r\n\r\ndata: b\r\ndata: c\r\n\r\n: x\r\n\r\ndata: [DONE]\r\n\r\n";
  const std::vector<SseEvent> want = {{"", "a", ""}, {"", "b\nc", ""}, {"", "[DONE]", ""}};
  for (size_t i = 0; i <= stream.size(); ++i) {
    for (size_t j = i; j <= stream.size(); ++j) {
      expect_same(parse_split(stream, {i, j}), want,
                  "cuts " + std::to_string(i) + "," + std::to_string(j));
    }
  }
}

TEST(SseParser, CrLfCutBetweenCallsIsOneLineEnd) {
  SseParser p;
  std::vector<SseEvent> events;
  ASSERT_TRUE(p.feed("data: x\r", &events).ok());
  ASSERT_TRUE(p.feed("\n\r", &events).ok());  // LF ends "data: x"; CR is the blank line
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "x");
  ASSERT_TRUE(p.feed("\ndata: y\n\n", &events).ok());  // this LF belongs to the CR
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].data, "y");
}

TEST(SseParser, CommentsAndEventsWithoutDataAreNotDispatched) {
  EXPECT_TRUE(parse_all(": ping\n\n:\n\nevent: x\n\nid: 3\n\n").empty());
}

TEST(SseParser, UnterminatedEventIsPartialNotDispatched) {
  SseParser p;
  std::vector<SseEvent> events;
  ASSERT_TRUE(p.feed("data: complete\n\ndata: cut off", &events).ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(p.has_partial_event());
  ASSERT_TRUE(p.feed("\n", &events).ok());
  EXPECT_EQ(events.size(), 1u);  // a line, but no blank line yet
  EXPECT_TRUE(p.has_partial_event());
  ASSERT_TRUE(p.feed("\n", &events).ok());
  EXPECT_EQ(events.size(), 2u);
  EXPECT_FALSE(p.has_partial_event());
}

TEST(SseParser, OversizeLineIsRejectedAndParserStaysFailed) {
  SseLimits limits;
  limits.max_line_bytes = 16;
  SseParser p(limits);
  std::vector<SseEvent> events;
  ASSERT_TRUE(p.feed("data: short\n\n", &events).ok());
  // 17 bytes without a line end, delivered in two pieces.
  ASSERT_TRUE(p.feed("data: 0123456", &events).ok());
  const absl::Status s = p.feed("7890", &events);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(s));
  EXPECT_THAT(std::string(s.message()), HasSubstr("line longer than 16 bytes"));
  const absl::Status again = p.feed("\n\ndata: ok\n\n", &events);
  EXPECT_EQ(again, s);
  EXPECT_EQ(events.size(), 1u);
}

TEST(SseParser, OversizeEventIsRejectedEvenWithShortLines) {
  SseLimits limits;
  limits.max_line_bytes = 64;
  limits.max_event_bytes = 20;
  SseParser p(limits);
  std::vector<SseEvent> events;
  // 3 data lines of 8 bytes: 8 + 1 + 8 = 17 fits, + 1 + 8 = 26 does not.
  const absl::Status s = p.feed("data: 01234567\ndata: 01234567\ndata: 01234567\n\n", &events);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(s));
  EXPECT_THAT(std::string(s.message()), HasSubstr("data larger than 20 bytes"));
  EXPECT_TRUE(events.empty());
}

TEST(SseParser, EventsBeforeTheOversizeOneAreKept) {
  SseLimits limits;
  limits.max_line_bytes = 12;
  SseParser p(limits);
  std::vector<SseEvent> events;
  EXPECT_FALSE(p.feed("data: a\n\ndata: b\n\ndata: 0123456789\n\n", &events).ok());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].data, "b");
}

TEST(SseParser, CountsBytes) {
  SseParser p;
  std::vector<SseEvent> events;
  ASSERT_TRUE(p.feed("data: x\r\n", &events).ok());
  ASSERT_TRUE(p.feed("\r\n", &events).ok());
  EXPECT_EQ(p.bytes_consumed(), 11);
}

}  // namespace
}  // namespace muflow::http::client
