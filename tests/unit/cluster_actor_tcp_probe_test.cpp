// tcp_accepts (actors/cluster/tcp_probe.hpp, #18 rejoin): true where something listens, false
// where nothing does, and false within about its bound where nothing answers at all.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "actors/cluster/tcp_probe.hpp"

namespace muflow::actors::cluster {
namespace {

// A loopback socket bound to a free port; listening when `listen_on`. Returns (fd, port).
std::pair<int, uint16_t> bound_socket(bool listen_on) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  EXPECT_EQ(0, ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)));
  socklen_t len = sizeof(a);
  EXPECT_EQ(0, ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len));
  if (listen_on) {
    EXPECT_EQ(0, ::listen(fd, 4));
  }
  return {fd, ntohs(a.sin_port)};
}

TEST(TcpAccepts, TrueWhereSomethingListensFalseWhereNothingDoes) {
  auto [listening, open_port] = bound_socket(true);
  EXPECT_TRUE(tcp_accepts("127.0.0.1", open_port, std::chrono::milliseconds(1000)));
  EXPECT_TRUE(tcp_accepts("localhost", open_port, std::chrono::milliseconds(1000)));
  // Bound but not listening: the port refuses connections.
  auto [bound, closed_port] = bound_socket(false);
  EXPECT_FALSE(tcp_accepts("127.0.0.1", closed_port, std::chrono::milliseconds(1000)));
  EXPECT_FALSE(tcp_accepts("no-such-host.invalid", open_port, std::chrono::milliseconds(1000)));
  ::close(listening);
  ::close(bound);
}

TEST(TcpAccepts, AnAddressThatDoesNotAnswerIsFalseWithinItsBound) {
  // A listener that never accepts, with its accept queue full: Linux drops further SYNs, so a
  // connect there gets no answer at all, like a host that is down (a blocking connect(2) would
  // wait for the kernel's SYN timeout, ~2 min).
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(0, ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)));
  socklen_t len = sizeof(a);
  ASSERT_EQ(0, ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len));
  ASSERT_EQ(0, ::listen(fd, 0));
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {  // fill the queue (its length is the backlog + 1)
    const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    fillers.push_back(c);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(tcp_accepts("127.0.0.1", ntohs(a.sin_port), std::chrono::milliseconds(300)));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(250)) << "it waited for an answer";
  EXPECT_LT(took, std::chrono::seconds(3)) << "a silent address holds the probe for its bound";
  for (int c : fillers) ::close(c);
  ::close(fd);
}

}  // namespace
}  // namespace muflow::actors::cluster
