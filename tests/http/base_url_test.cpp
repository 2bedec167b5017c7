// `muflow bench --url`'s URL parser: accepted forms and clear errors for bad ones.

#include "http/client/base_url.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace muflow::http::client {
namespace {

using ::testing::HasSubstr;

TEST(BaseUrl, AcceptsHostPortAndPrefix) {
  absl::StatusOr<BaseUrl> u = parse_base_url("http://127.0.0.1:8000");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->scheme, "http");
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8000);
  EXPECT_EQ(u->path_prefix, "");
  EXPECT_EQ(u->origin(), "http://127.0.0.1:8000");

  u = parse_base_url("HTTP://localhost/");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->path_prefix, "");

  u = parse_base_url("https://example.org/api/v1/");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->path_prefix, "/api");  // "/v1" is dropped: endpoints add it
  EXPECT_EQ(u->text(), "https://example.org:443/api");

  u = parse_base_url("http://[::1]:9000/v1");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->host, "[::1]");
  EXPECT_EQ(u->port, 9000);
  EXPECT_EQ(u->path_prefix, "");
}

TEST(BaseUrl, RejectsBadUrlsWithAReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"127.0.0.1:8000", "no scheme"},
      {"ftp://host", "scheme 'ftp' is not http or https"},
      {"http://", "empty host"},
      {"http://:8000", "empty host"},
      {"http://host:", "empty port"},
      {"http://host:0", "not a number in [1, 65535]"},
      {"http://host:65536", "not a number in [1, 65535]"},
      {"http://host:80x", "not a number in [1, 65535]"},
      {"http://host:-1", "not a number in [1, 65535]"},
      {"http://user@host", "user info"},
      {"http://host/?a=1", "query or fragment"},
      {"http://ho st", "space or control character"},
      {"http://::1:80", "IPv6 host must be written in brackets"},
      {"http://[::1", "unterminated '['"},
      {"", "no scheme"},
  };
  for (const auto& [url, why] : cases) {
    const absl::StatusOr<BaseUrl> u = parse_base_url(url);
    ASSERT_FALSE(u.ok()) << url;
    EXPECT_TRUE(absl::IsInvalidArgument(u.status())) << url;
    EXPECT_THAT(std::string(u.status().message()), HasSubstr(why)) << url;
    EXPECT_THAT(std::string(u.status().message()), HasSubstr("expected http://HOST[:PORT]")) << url;
  }
}

}  // namespace
}  // namespace muflow::http::client
