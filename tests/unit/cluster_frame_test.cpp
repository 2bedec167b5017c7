// The data-plane frame (transport/cluster/frame.hpp): round trip, and every malformed prefix
// rejected with an error naming the field, never a read outside the message.

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "transport/cluster/frame.hpp"

namespace muflow::transport::cluster {
namespace {

std::vector<char> message(const FramePrefix& p, const std::string& header,
                          const std::string& payload) {
  std::vector<char> m = encode_frame_prefix(p);
  m.insert(m.end(), header.begin(), header.end());
  m.insert(m.end(), payload.begin(), payload.end());
  return m;
}

FramePrefix prefix(uint32_t header_bytes, uint64_t payload_bytes) {
  FramePrefix p;
  p.kind = 7;
  p.source = 3;
  p.header_bytes = header_bytes;
  p.payload_bytes = payload_bytes;
  p.sequence = 0x0123456789abcdefull;
  p.run = 0xfedcba9876543210ull;
  return p;
}

TEST(ClusterFrame, RoundTripsEveryField) {
  const auto m = message(prefix(5, 3), "hello", "xyz");
  ASSERT_EQ(m.size(), 40u + 5 + 3);
  auto v = parse_frame(m);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->prefix.kind, 7);
  EXPECT_EQ(v->prefix.source, 3u);
  EXPECT_EQ(v->prefix.sequence, 0x0123456789abcdefull);
  EXPECT_EQ(v->prefix.run, 0xfedcba9876543210ull);
  EXPECT_EQ(std::string(v->header.begin(), v->header.end()), "hello");
  EXPECT_EQ(std::string(v->payload.begin(), v->payload.end()), "xyz");
}

TEST(ClusterFrame, EmptyHeaderAndPayload) {
  const auto m = message(prefix(0, 0), "", "");
  auto v = parse_frame(m);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->header.empty());
  EXPECT_TRUE(v->payload.empty());
}

TEST(ClusterFrame, RejectsShortWrongMagicWrongVersion) {
  auto m = message(prefix(0, 0), "", "");
  EXPECT_NE(parse_frame(std::span<const char>(m.data(), 39)).status().message().find("prefix"),
            std::string::npos);
  auto bad_magic = m;
  bad_magic[0] ^= 1;
  EXPECT_NE(parse_frame(bad_magic).status().message().find("magic"), std::string::npos);
  auto bad_version = m;
  bad_version[4] = 9;
  EXPECT_NE(parse_frame(bad_version).status().message().find("version"), std::string::npos);
  // A version-1 frame (32-byte prefix, no run attempt) is refused by its version.
  auto v1 = m;
  v1[4] = 1;
  EXPECT_NE(parse_frame(v1).status().message().find("version 1, expected 2"), std::string::npos)
      << parse_frame(v1).status();
}

TEST(ClusterFrame, RejectsLengthsThatDisagreeWithTheMessage) {
  // Prefix announces more than the message holds (truncated), or less (trailing bytes).
  auto truncated = message(prefix(10, 0), "short", "");
  auto s = parse_frame(truncated).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("announces"), std::string::npos) << s;
  auto trailing = message(prefix(1, 1), "a", "bcd");
  EXPECT_NE(parse_frame(trailing).status().message().find("announces"), std::string::npos);
  // A huge announced payload (would overflow a naive 40 + h + p) is refused by the limit.
  auto huge = message(prefix(0, ~uint64_t{0}), "", "");
  EXPECT_NE(parse_frame(huge).status().message().find("payload"), std::string::npos);
}

TEST(ClusterFrame, EnforcesLimits) {
  FrameLimits limits;
  limits.max_header_bytes = 4;
  limits.max_payload_bytes = 2;
  EXPECT_TRUE(parse_frame(message(prefix(4, 2), "abcd", "ef"), limits).ok());
  EXPECT_FALSE(parse_frame(message(prefix(5, 0), "abcde", ""), limits).ok());
  EXPECT_FALSE(parse_frame(message(prefix(0, 3), "", "efg"), limits).ok());
  EXPECT_FALSE(frame_message_bytes(5, 0, limits).ok());
  EXPECT_EQ(*frame_message_bytes(4, 2, limits), 46);
}

TEST(ClusterFrame, EveryTruncationOfAValidMessageIsAnErrorNotACrash) {
  const auto m = message(prefix(6, 9), "header", "payload!!");
  for (size_t n = 0; n < m.size(); ++n) {
    EXPECT_FALSE(parse_frame(std::span<const char>(m.data(), n)).ok()) << n;
  }
  EXPECT_TRUE(parse_frame(m).ok());
}

}  // namespace
}  // namespace muflow::transport::cluster
