// UCX data plane between two processes (#18 "Must show"): throughput of 4 KiB – 4 MiB
// messages (the token-batch channel's transport) and per-message latency (half a ping-pong
// round trip). A plain program: it re-runs itself as the peer process (`--peer IN OUT`), the
// two exchange UCX addresses over pipes, and each size streams `window` messages in flight.
//
//   build/release/bench/data_plane_throughput [--mib-per-size 256] [--window 8] [--spin-us 50]
//
// Prints one line per size as it is measured (an interrupted run keeps what it finished).
// Buffers are filled before the timed region: the figure is the data plane's, not memcpy's.
// The receiver allocates a fresh buffer per message, as the runtime does.

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "transport/cluster/address_pipe.hpp"
#include "transport/cluster/data_plane.hpp"
#include "transport/cluster/received_queue.hpp"

extern char** environ;

namespace {

using muflow::transport::cluster::DataPlane;
using muflow::transport::cluster::Received;
using Clock = std::chrono::steady_clock;

// Waits without a deadline (a benchmark either finishes or is interrupted).
class Inbox : public muflow::transport::cluster::ReceivedQueue {
 public:
  Received pop() {
    for (;;) {
      if (auto r = ReceivedQueue::pop(std::chrono::hours(1))) return std::move(*r);
    }
  }
};

std::vector<char> recv_blob(int fd) {
  auto b = muflow::transport::cluster::read_blob(fd);
  return b ? std::move(*b) : std::vector<char>{};
}

long g_spin_us = 50;

std::unique_ptr<DataPlane> plane_or_die(uint32_t process, Inbox& inbox) {
  DataPlane::Options o;
  o.spin_us = g_spin_us;
  o.process = process;
  o.name = process == 0 ? "bench" : "bench-peer";
  auto p = DataPlane::create(o, inbox.handler());
  if (!p.ok()) {
    std::fprintf(stderr, "data_plane_throughput: %s\n", std::string(p.status().message()).c_str());
    std::exit(1);
  }
  return std::move(*p);
}

// Peer protocol: a 1-byte message 'p' is echoed at once (latency); a message of 16 bytes
// "count:<n>" announces a stream of n messages, acknowledged by one 1-byte 'a' after the
// last; "quit" ends.
int run_peer(int in_fd, int out_fd) {
  Inbox inbox;
  auto plane = plane_or_die(1, inbox);
  if (!muflow::transport::cluster::write_blob(out_fd, plane->address())) return 3;
  if (!plane->connect(0, recv_blob(in_fd)).ok()) return 4;
  for (;;) {
    Received r = inbox.pop();
    const std::string head(r.bytes.get(), std::min<size_t>(r.size, 16));
    if (head == "quit") return 0;
    if (r.size == 1 && r.bytes[0] == 'p') {
      plane->send(0, {std::vector<char>{'p'}});
    } else if (head.rfind("count:", 0) == 0) {
      const long n = std::atol(head.c_str() + 6);
      for (long i = 0; i < n; ++i) (void)inbox.pop();
      plane->send(0, {std::vector<char>{'a'}});
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--peer") {
    g_spin_us = std::atol(argv[4]);
    return run_peer(std::atoi(argv[2]), std::atoi(argv[3]));
  }
  long mib_per_size = 256, window = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--mib-per-size")
      mib_per_size = std::atol(argv[i + 1]);
    else if (k == "--window")
      window = std::atol(argv[i + 1]);
    else if (k == "--spin-us")
      g_spin_us = std::atol(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--mib-per-size N] [--window N] [--spin-us N]\n", argv[0]);
      return 2;
    }
  }
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return 1;
  self[len] = 0;
  int to_peer[2], from_peer[2];
  if (::pipe(to_peer) != 0 || ::pipe(from_peer) != 0) return 1;
  std::string in_fd = std::to_string(to_peer[0]), out_fd = std::to_string(from_peer[1]);
  std::string spin = std::to_string(g_spin_us);
  char* pargv[] = {self,   const_cast<char*>("--peer"), in_fd.data(), out_fd.data(), spin.data(),
                   nullptr};
  pid_t pid = 0;
  if (::posix_spawn(&pid, self, nullptr, nullptr, pargv, environ) != 0) return 1;
  ::close(to_peer[0]);
  ::close(from_peer[1]);

  Inbox inbox;
  auto plane = plane_or_die(0, inbox);
  const std::vector<char> peer_address = recv_blob(from_peer[0]);
  if (!muflow::transport::cluster::write_blob(to_peer[1], plane->address()) ||
      !plane->connect(1, peer_address).ok())
    return 1;
  const char* tls = std::getenv("UCX_TLS");
  std::printf("# UCX data plane, 2 processes on this host, UCX_TLS=%s, window %ld, spin %ld us\n",
              tls ? tls : "(default)", window, g_spin_us);

  // Latency: ping-pong of 1 byte, half the round trip.
  for (int i = 0; i < 200; ++i) {  // warm-up
    plane->send(1, {std::vector<char>{'p'}});
    (void)inbox.pop();
  }
  const int pings = 5000;
  auto t0 = Clock::now();
  for (int i = 0; i < pings; ++i) {
    plane->send(1, {std::vector<char>{'p'}});
    (void)inbox.pop();
  }
  const double rtt_us =
      std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / pings;
  std::printf("latency: 1-byte message, half round trip %.1f us (%d ping-pongs)\n", rtt_us / 2,
              pings);
  std::printf("%10s %10s %10s %10s\n", "bytes", "messages", "seconds", "GB/s");
  std::fflush(stdout);

  for (size_t size = 4096; size <= (4u << 20); size *= 4) {
    const long n = std::max<long>(16, (mib_per_size << 20) / static_cast<long>(size));
    std::vector<std::vector<char>> bufs(static_cast<size_t>(n));
    for (auto& b : bufs) b.assign(size, 'x');
    const std::string announce = "count:" + std::to_string(n);
    plane->send(1, {std::vector<char>(announce.begin(), announce.end())});
    std::atomic<long> completed{0};
    std::mutex mu;
    std::condition_variable cv;
    auto done = [&](absl::Status) {
      completed.fetch_add(1);
      std::lock_guard<std::mutex> lock(mu);
      cv.notify_all();
    };
    t0 = Clock::now();
    for (long i = 0; i < n; ++i) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return i - completed.load() < window; });
      }
      plane->send(1, {std::move(bufs[static_cast<size_t>(i)])}, done);
    }
    (void)inbox.pop();  // the peer's ack after the last message
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("%10zu %10ld %10.4f %10.2f\n", size, n, s, static_cast<double>(size) * n / s / 1e9);
    std::fflush(stdout);
  }
  plane->send(1, {std::vector<char>{'q', 'u', 'i', 't'}});
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
