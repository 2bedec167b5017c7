// `muflow worker` and the driver's join (actors/cluster/): a driver with the cluster secret
// joins a worker process over CAF's middleman and pings it over the UCX data plane (a join from
// the driver's next data plane gets a fresh worker plane, one from the same keeps it); a wrong
// secret is refused with a log line (and the worker still takes the right one afterwards);
// malformed data-plane messages are rejected without crashing the worker; a non-loopback
// --listen needs --allow-remote; no secret, no worker.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/cluster/control_messages.hpp"
#include "actors/cluster/driver_link.hpp"
#include "actors/cluster/frame_kinds.hpp"
#include "scratch_path.hpp"
#include "transport/cluster/frame.hpp"
#include "transport/cluster/received_queue.hpp"
#include "worker_process.hpp"

extern char** environ;

namespace muflow::actors::cluster {
namespace {

using transport::cluster::ClusterSecret;
using transport::cluster::DataPlane;
using transport::cluster::FramePrefix;
using transport::cluster::Received;

const char* kJoinToken = "the-right-cluster-token-0123456789";

using muflow::testing::WorkerProcess;

class Inbox : public transport::cluster::ReceivedQueue {
 public:
  std::optional<Received> pop(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    return ReceivedQueue::pop(timeout);
  }
};

// The driver's side: an actor system with the middleman and a data plane as process 0.
struct Driver {
  Driver() : sys(with_middleman(cfg)) {
    DataPlane::Options o;
    o.process = 0;
    o.name = "driver data plane";
    auto p = DataPlane::create(o, inbox.handler());
    EXPECT_TRUE(p.ok()) << p.status();
    plane = std::move(*p);
  }
  static caf::actor_system_config& with_middleman(caf::actor_system_config& c) {
    c.load<caf::io::middleman>();
    c.set("scheduler.max-threads", 2);
    return c;
  }
  caf::actor_system_config cfg;  // before sys: the system keeps a reference to it
  caf::actor_system sys;
  Inbox inbox;
  std::unique_ptr<DataPlane> plane;
};

std::vector<char> frame(FrameKind kind, uint32_t source, const std::string& header,
                        const std::string& payload) {
  FramePrefix p;
  p.kind = static_cast<uint16_t>(kind);
  p.source = source;
  p.header_bytes = static_cast<uint32_t>(header.size());
  p.payload_bytes = payload.size();
  std::vector<char> m = transport::cluster::encode_frame_prefix(p);
  m.insert(m.end(), header.begin(), header.end());
  m.insert(m.end(), payload.begin(), payload.end());
  return m;
}

// Pings worker `process` and checks the pong carries the same header and payload.
void expect_pong(Driver& d, uint32_t process, const std::string& header,
                 const std::string& payload) {
  d.plane->send(process, {frame(FrameKind::kPing, 0, header, payload)});
  auto r = d.inbox.pop();
  ASSERT_TRUE(r.has_value()) << "no pong from worker " << process;
  EXPECT_EQ(r->tag, process);
  auto f = transport::cluster::parse_frame(r->view());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->prefix.kind, static_cast<uint16_t>(FrameKind::kPong));
  EXPECT_EQ(f->prefix.source, process);
  EXPECT_EQ(std::string(f->header.begin(), f->header.end()), header);
  EXPECT_EQ(std::string(f->payload.begin(), f->payload.end()), payload);
}

// Joins the worker listening on `port` with the cluster token `token` (kJoinToken unless given).
absl::StatusOr<WorkerLink> join(Driver& d, uint16_t port, const std::string& token = kJoinToken) {
  absl::StatusOr<ClusterSecret> secret = ClusterSecret::from_string(token);
  EXPECT_TRUE(secret.ok()) << secret.status();  // every token here is a valid one
  if (!secret.ok()) return secret.status();
  return join_worker(d.sys, {"127.0.0.1", port}, *secret, 1, *d.plane);
}

TEST(WorkerJoin, TheRightTokenJoinsAndTheDataPlaneCarriesPings) {
  WorkerProcess w({"--listen", "127.0.0.1:0"}, kJoinToken);
  const uint16_t port = w.port();
  ASSERT_NE(port, 0) << w.log();
  Driver d;
  auto link = join(d, port);
  ASSERT_TRUE(link.ok()) << link.status() << "\nworker log:\n" << w.log();
  EXPECT_FALSE(link->ucx_address.empty());
  expect_pong(d, 1, "hdr", std::string(1 << 20, 'p'));  // 1 MiB: UCX rendezvous
  expect_pong(d, 1, "", "");
  EXPECT_EQ(w.stop(), 0) << w.log();
  EXPECT_NE(w.log().find("authenticated"), std::string::npos) << w.log();
}

// A driver makes a data plane per attempt (e.g. after it lost a worker); the worker makes its
// own afresh when a join comes from another driver plane, so that no UCX state of the last
// attempt (endpoints to a peer that died, its receives) carries over, and keeps it for a join
// from the same one. The new plane carries pings both ways.
TEST(WorkerJoin, TheDriversNextAttemptGetsAFreshDataPlaneAndTheSameOneKeepsIt) {
  WorkerProcess w({"--listen", "127.0.0.1:0"}, kJoinToken);
  const uint16_t port = w.port();
  ASSERT_NE(port, 0) << w.log();
  std::vector<char> first_address;
  {
    Driver first;
    auto link = join(first, port);
    ASSERT_TRUE(link.ok()) << link.status() << "\nworker log:\n" << w.log();
    expect_pong(first, 1, "first attempt", "");
    auto again = join(first, port);
    ASSERT_TRUE(again.ok()) << again.status() << "\nworker log:\n" << w.log();
    EXPECT_EQ(again->ucx_address, link->ucx_address) << "the same driver plane: the plane stays";
    expect_pong(first, 1, "first attempt, joined again", "");
    first_address = link->ucx_address;
  }
  Driver next;
  auto link = join(next, port);
  ASSERT_TRUE(link.ok()) << link.status() << "\nworker log:\n" << w.log();
  EXPECT_NE(link->ucx_address, first_address) << "another driver plane: a new worker plane";
  expect_pong(next, 1, "next attempt", std::string(1 << 20, 'q'));  // 1 MiB: many eager fragments
  expect_pong(next, 1, "", "");
  EXPECT_EQ(w.stop(), 0) << w.log();
}

// A run's frames are stamped with the driver's attempt number (frame.hpp); 0 marks frames of no
// run, so a setup that asks for it is refused before anything of the run is built.
TEST(WorkerJoin, ASetupWithRunNumberZeroIsRefused) {
  WorkerProcess w({"--listen", "127.0.0.1:0"}, kJoinToken);
  const uint16_t port = w.port();
  ASSERT_NE(port, 0) << w.log();
  Driver d;
  auto link = join(d, port);
  ASSERT_TRUE(link.ok()) << link.status() << "\nworker log:\n" << w.log();
  caf::scoped_actor self{d.sys};
  std::string answer = "(no answer)";
  self->request(link->gate, std::chrono::seconds(20), setup_atom::value, std::string("x = 1"),
                std::string("."), std::vector<std::string>{"", ""}, std::string("1"), int64_t{-1},
                uint64_t{0})
      .receive([&](const std::string& a) { answer = a; },
               [&](const caf::error& e) { answer = "error: " + d.sys.render(e); });
  EXPECT_NE(answer.find("run number 0"), std::string::npos) << answer;
  expect_pong(d, 1, "still alive", "");
  EXPECT_EQ(w.stop(), 0) << w.log();
}

TEST(WorkerJoin, AWrongTokenIsRefusedWithALogLineAndTheRightOneStillJoins) {
  WorkerProcess w({"--listen", "127.0.0.1:0"}, kJoinToken);
  const uint16_t port = w.port();
  ASSERT_NE(port, 0) << w.log();
  Driver d;
  auto refused = join(d, port, "a-different-token-of-enough-length");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << refused.status();
  EXPECT_NE(refused.status().message().find("MUFLOW_CLUSTER_TOKEN"), std::string::npos);
  // Nothing was exchanged: the driver's data plane has no endpoint to the worker.
  EXPECT_EQ(d.plane->send_and_wait(1, {frame(FrameKind::kPing, 0, "", "")}).code(),
            absl::StatusCode::kFailedPrecondition);
  auto link = join(d, port);
  ASSERT_TRUE(link.ok()) << link.status() << "\n" << w.log();
  expect_pong(d, 1, "after refusal", "x");
  EXPECT_EQ(w.stop(), 0);
  const std::string log = w.log();
  EXPECT_NE(log.find("refused a connection"), std::string::npos) << log;
  EXPECT_NE(log.find("wrong cluster token"), std::string::npos) << log;
}

TEST(WorkerJoin, MalformedDataPlaneMessagesAreRejectedAndTheWorkerLivesOn) {
  WorkerProcess w({"--listen", "127.0.0.1:0", "--max-message-mib", "1"}, kJoinToken);
  const uint16_t port = w.port();
  ASSERT_NE(port, 0) << w.log();
  Driver d;
  auto link = join(d, port);
  ASSERT_TRUE(link.ok()) << link.status();
  std::vector<char> truncated = frame(FrameKind::kPing, 0, "header", "payload");
  truncated.resize(truncated.size() - 3);
  d.plane->send(1, {std::vector<char>{'n', 'o', 't', ' ', 'a', ' ', 'f', 'r', 'a', 'm', 'e'}});
  d.plane->send(1, {truncated});
  d.plane->send(1, {frame(FrameKind::kPing, 7, "", "")});             // claims another sender
  d.plane->send(1, {frame(static_cast<FrameKind>(999), 0, "", "")});  // unknown kind
  d.plane->send(1, {std::vector<char>(2 << 20, 'x')});                // above --max-message-mib
  expect_pong(d, 1, "still alive", "y");
  EXPECT_FALSE(d.inbox.pop(std::chrono::milliseconds(100)).has_value())
      << "a malformed message was answered";
  EXPECT_EQ(w.stop(), 0) << "the worker crashed:\n" << w.log();
  const std::string log = w.log();
  for (const char* why : {"shorter than the 40-byte prefix", "announces", "claims process 7",
                          "unknown frame kind 999", "larger than the"}) {
    EXPECT_NE(log.find(why), std::string::npos) << why << "\n" << log;
  }
}

TEST(WorkerJoin, ANonLoopbackAddressNeedsAllowRemoteAndAWorkerNeedsASecret) {
  WorkerProcess remote({"--listen", "0.0.0.0:0"}, kJoinToken);
  EXPECT_EQ(remote.port(), 0);
  EXPECT_EQ(remote.stop(false), 2);
  EXPECT_NE(remote.log().find("--allow-remote"), std::string::npos) << remote.log();

  WorkerProcess no_secret({"--listen", "127.0.0.1:0"}, std::nullopt);
  EXPECT_EQ(no_secret.port(), 0);
  EXPECT_EQ(no_secret.stop(false), 2);
  EXPECT_NE(no_secret.log().find("MUFLOW_CLUSTER_TOKEN"), std::string::npos) << no_secret.log();

  WorkerProcess bad_listen({"--listen", "127.0.0.1"}, kJoinToken);
  EXPECT_EQ(bad_listen.stop(false), 2);
  EXPECT_NE(bad_listen.log().find("HOST:PORT"), std::string::npos) << bad_listen.log();
}

// True once `pid` no longer runs (gone, or a zombie nobody reaped: it is not our child).
bool gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto close = line.rfind(')');
  return close != std::string::npos && line.size() > close + 2 && line[close + 2] == 'Z';
}

// `--exit-with-parent`: a worker whose starter dies by kill -9 (so nothing stops it) exits by
// itself, as `muflow run --spawn-workers` relies on.
TEST(WorkerJoin, AWorkerWithExitWithParentStopsWhenItsStarterIsKilled) {
  const std::string script = std::string("\"$0\" worker --listen 127.0.0.1:0 --exit-with-parent ") +
                             "> /dev/null 2>&1 & echo $!; wait";
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "MUFLOW_CLUSTER_TOKEN=", 21) != 0) env.emplace_back(*e);
  }
  env.push_back(std::string("MUFLOW_CLUSTER_TOKEN=") + kJoinToken);
  std::vector<std::string> args = {"/bin/sh", "-c", script, MUFLOW_BINARY};
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t starter = 0;
  ASSERT_EQ(::posix_spawn(&starter, "/bin/sh", &fa, nullptr, argv.data(), envp.data()), 0);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  std::string line;
  char c = 0;
  while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(out[0]);
  const pid_t worker = static_cast<pid_t>(std::atol(line.c_str()));
  ASSERT_GT(worker, 0) << "the starter printed no pid: '" << line << "'";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the worker is up
  EXPECT_FALSE(gone(worker)) << "the worker exited while its starter lived";
  ASSERT_EQ(::kill(starter, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(starter, &status, 0), starter);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!gone(worker) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone(worker)) << "the worker outlived its killed starter";
  if (!gone(worker)) ::kill(worker, SIGKILL);
}

}  // namespace
}  // namespace muflow::actors::cluster
