// LaunchedWorkers::restart_exited (#18, `muflow serve --spawn-workers`): a loopback worker that
// dies is reaped and started again on the port it listened on, after a wait that doubles while
// it keeps dying soon after its start; a running worker is left alone.

#include "actors/cluster/worker_launcher.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace muflow::actors::cluster {
namespace {

const char* kLauncherToken = "worker-launcher-test-token-0123456789abcdef";

// Calls restart_exited every 20 ms until it reports a line containing `what` (at most 30 s);
// returns every line it reported meanwhile.
std::vector<std::string> restart_until(LaunchedWorkers& w, const std::string& what,
                                       std::chrono::milliseconds min_gap) {
  std::vector<std::string> seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    for (std::string& line : w.restart_exited(min_gap)) {
      const bool done = line.find(what) != std::string::npos;
      seen.push_back(std::move(line));
      if (done) return seen;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "restart_exited never reported '" << what << "'";
  return seen;
}

TEST(LaunchedWorkers, AWorkerThatDiesIsStartedAgainOnItsPortWithADoublingWait) {
  auto w = LaunchedWorkers::launch(MUFLOW_BINARY, {"127.0.0.1:0", "127.0.0.1:0"}, kLauncherToken,
                                   {"--threads", "1"});
  ASSERT_TRUE(w.ok()) << w.status();
  const std::string address = (*w)->addresses()[0];
  const pid_t first = (*w)->pid(0), other = (*w)->pid(1);
  EXPECT_TRUE((*w)->restart_exited(std::chrono::milliseconds(100)).empty())
      << "both run: nothing to do";

  ASSERT_EQ(0, ::kill(first, SIGKILL));
  std::vector<std::string> lines =
      restart_until(**w, "started again", std::chrono::milliseconds(100));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("was killed by signal 9; starting it again in 0.1 s"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find("worker 1 started again on " + address), std::string::npos) << lines[1];
  const pid_t second = (*w)->pid(0);
  EXPECT_NE(second, first);
  EXPECT_GT(second, 0);
  EXPECT_EQ(0, ::kill(second, 0)) << "the restarted worker runs";
  EXPECT_EQ((*w)->pid(1), other) << "the other worker was left alone";
  EXPECT_EQ((*w)->addresses()[0], address) << "the same port";

  // Dead again within a minute of its start: the next wait is twice as long.
  ASSERT_EQ(0, ::kill(second, SIGKILL));
  lines = restart_until(**w, "started again", std::chrono::milliseconds(100));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("starting it again in 0.2 s"), std::string::npos) << lines[0];
  EXPECT_NE((*w)->pid(0), second);
}

}  // namespace
}  // namespace muflow::actors::cluster
