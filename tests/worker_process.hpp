#pragma once
/// \file
/// A `muflow worker` child process for tests (the binary `MUFLOW_BINARY`, with
/// `--exit-with-parent`): its stdout (the "listening on" line) through a pipe, its stderr into
/// a scratch file the test can read; `token` (optional) is its MUFLOW_CLUSTER_TOKEN, in its
/// environment only. Killed (SIGKILL) at the end of the scope unless `stop` ended it. Only
/// the C++ standard library, POSIX and GoogleTest: usable by the tests that link the public
/// library alone (api_test) as well as the internal ones.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "scratch_path.hpp"

extern char** environ;

namespace muflow::testing {

class WorkerProcess {
 public:
  WorkerProcess(std::vector<std::string> args, std::optional<std::string> token)
      : log_(muflow::testing::scratch_path("worker-" + std::to_string(counter_++) + ".log")) {
    int out[2];
    EXPECT_EQ(::pipe(out), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      if (std::strncmp(*e, "MUFLOW_CLUSTER_TOKEN=", 21) != 0) env.emplace_back(*e);
    }
    if (token) env.push_back("MUFLOW_CLUSTER_TOKEN=" + *token);
    args.insert(args.begin(), {MUFLOW_BINARY, "worker", "--exit-with-parent"});
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    EXPECT_EQ(::posix_spawn(&pid_, MUFLOW_BINARY, &fa, nullptr, argv.data(), envp.data()), 0);
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    out_ = ::fdopen(out[0], "r");
  }
  ~WorkerProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_) std::fclose(out_);
    std::filesystem::remove(log_);
  }
  // The port from "muflow worker: listening on HOST:PORT", or 0 if the worker exited first.
  uint16_t port() {
    char line[512];
    if (!std::fgets(line, sizeof line, out_)) return 0;
    const std::string s(line);
    const auto at = s.find("listening on ");
    if (at == std::string::npos) return 0;
    const auto colon = s.find(':', at + 13);
    return static_cast<uint16_t>(std::stoi(s.substr(colon + 1)));
  }
  // Exit code after SIGTERM (or after it exited on its own when `signal` is false).
  int stop(bool signal = true) {
    if (signal) ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    exited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  static inline int counter_ = 0;
  std::filesystem::path log_;
  pid_t pid_ = 0;
  bool exited_ = false;
  FILE* out_ = nullptr;
};

}  // namespace muflow::testing
