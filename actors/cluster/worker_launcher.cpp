#include "actors/cluster/worker_launcher.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_format.h"
#include "transport/cluster/cluster_secret.hpp"

extern char** environ;

namespace muflow::actors::cluster {
namespace {

// Reads one line from `fd` (at most 1 KiB) before `deadline`; false on timeout, EOF or error.
bool read_line(int fd, std::chrono::steady_clock::time_point deadline, std::string& line) {
  line.clear();
  while (line.size() < 1024) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    char c = 0;
    const ssize_t got = ::read(fd, &c, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    if (c == '\n') return true;
    line.push_back(c);
  }
  return false;
}

void stop_and_reap(std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    if (pid > 0) ::kill(pid, SIGTERM);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (pid_t& pid : pids) {
    if (pid <= 0) continue;
    for (;;) {
      const pid_t r = ::waitpid(pid, nullptr, WNOHANG);
      if (r == pid || (r < 0 && errno != EINTR)) break;
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid = 0;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<LaunchedWorkers>> LaunchedWorkers::launch(
    const std::string& binary, const std::vector<std::string>& listen, const std::string& token,
    const std::vector<std::string>& extra_args, std::chrono::milliseconds timeout) {
  std::unique_ptr<LaunchedWorkers> w(new LaunchedWorkers());
  w->binary_ = binary;
  w->timeout_ = timeout;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!token.empty() && std::strncmp(*e, "MUFLOW_CLUSTER_TOKEN=", 21) == 0) continue;
    w->env_.emplace_back(*e);
  }
  if (!token.empty()) w->env_.push_back("MUFLOW_CLUSTER_TOKEN=" + token);
  w->shared_args_ = extra_args;
  const bool has_threads = std::any_of(extra_args.begin(), extra_args.end(), [](const auto& a) {
    return a == "--threads" || a.rfind("--threads=", 0) == 0;
  });
  if (!has_threads && !listen.empty()) {
    const auto hardware = static_cast<size_t>(std::max(1u, std::thread::hardware_concurrency()));
    w->shared_args_.push_back("--threads");
    w->shared_args_.push_back(std::to_string(std::max<size_t>(1, hardware / listen.size())));
  }
  for (const std::string& address : listen) {
    absl::StatusOr<Started> started = w->start_one(address);
    if (!started.ok()) return started.status();  // the destructor stops the started ones
    w->pids_.push_back(started->pid);
    w->stdout_fds_.push_back(started->stdout_fd);
    w->addresses_.push_back(started->address);
    w->started_at_.push_back(std::chrono::steady_clock::now());
    w->next_gap_.push_back(std::chrono::milliseconds(0));
    w->exited_at_.emplace_back();
  }
  return w;
}

absl::StatusOr<LaunchedWorkers::Started> LaunchedWorkers::start_one(const std::string& address) {
  std::vector<std::string> args = {binary_, "worker", "--listen", address, "--exit-with-parent"};
  args.insert(args.end(), shared_args_.begin(), shared_args_.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = env_;
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrFormat("pipe: %s", std::strerror(errno)));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, binary_.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    return absl::InternalError(
        absl::StrFormat("cannot start %s worker: %s", binary_, std::strerror(rc)));
  }
  std::string line;
  const bool got = read_line(out[0], std::chrono::steady_clock::now() + timeout_, line);
  const auto at = line.find("listening on ");
  const auto end = line.find(' ', at == std::string::npos ? 0 : at + 13);
  if (!got || at == std::string::npos) {
    std::vector<pid_t> failed = {pid};
    stop_and_reap(failed);
    ::close(out[0]);
    return absl::UnavailableError(absl::StrFormat(
        "the worker for %s (pid %d) did not start listening within %d ms (its errors are "
        "above)",
        address, pid, timeout_.count()));
  }
  Started s;
  s.pid = pid;
  s.stdout_fd = out[0];  // kept open by the caller: a later write must not raise SIGPIPE
  s.address = line.substr(at + 13, end == std::string::npos ? std::string::npos : end - at - 13);
  return s;
}

std::vector<std::string> LaunchedWorkers::restart_exited(std::chrono::milliseconds min_gap) {
  std::vector<std::string> log;
  // At least 1 ms: a wait of 0 would double to 0 and never back off.
  min_gap = std::max(min_gap, std::chrono::milliseconds(1));
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < addresses_.size(); ++i) {
    if (pids_[i] > 0) {
      int status = 0;
      const pid_t r = ::waitpid(pids_[i], &status, WNOHANG);
      if (r != pids_[i]) continue;  // running (or not ours to reap)
      pids_[i] = 0;
      exited_at_[i] = now;
      // One that died within a minute of its start waits twice as long as last time.
      next_gap_[i] = now - started_at_[i] < std::chrono::minutes(1)
                         ? std::min<std::chrono::milliseconds>(std::max(min_gap, next_gap_[i] * 2),
                                                               std::chrono::minutes(5))
                         : min_gap;
      log.push_back(absl::StrFormat(
          "worker %d on %s (pid %d) %s; starting it again in %.1f s", i + 1, addresses_[i],
          static_cast<int>(r),
          WIFSIGNALED(status) ? absl::StrFormat("was killed by signal %d", WTERMSIG(status))
                              : absl::StrFormat("exited with status %d", WEXITSTATUS(status)),
          std::chrono::duration<double>(next_gap_[i]).count()));
    }
    if (pids_[i] > 0 || now - exited_at_[i] < next_gap_[i]) continue;
    absl::StatusOr<Started> started = start_one(addresses_[i]);
    if (started.ok()) {
      pids_[i] = started->pid;
      ::close(stdout_fds_[i]);
      stdout_fds_[i] = started->stdout_fd;
    }
    started_at_[i] = std::chrono::steady_clock::now();
    if (!started.ok()) {
      exited_at_[i] = started_at_[i];
      next_gap_[i] = std::min<std::chrono::milliseconds>(std::max(min_gap, next_gap_[i] * 2),
                                                         std::chrono::minutes(5));
      log.push_back(absl::StrFormat("worker %d on %s did not start again (%s); next try in %.1f s",
                                    i + 1, addresses_[i], started.status().message(),
                                    std::chrono::duration<double>(next_gap_[i]).count()));
      continue;
    }
    log.push_back(absl::StrFormat("worker %d started again on %s (pid %d)", i + 1, addresses_[i],
                                  static_cast<int>(pids_[i])));
  }
  return log;
}

LaunchedWorkers::~LaunchedWorkers() {
  stop_and_reap(pids_);
  for (int fd : stdout_fds_) ::close(fd);
}

int LaunchedWorkers::reap(size_t i) {
  int status = 0;
  pid_t& pid = pids_.at(i);
  if (pid > 0) {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    pid = 0;
  }
  return status;
}

absl::StatusOr<std::string> make_cluster_token() {
  auto nonce = transport::cluster::make_nonce();
  if (!nonce.ok()) return nonce.status();
  std::string hex;
  for (uint8_t b : *nonce) hex += absl::StrFormat("%02x", b);
  return hex;
}

}  // namespace muflow::actors::cluster
