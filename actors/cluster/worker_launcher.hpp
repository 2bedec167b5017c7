#pragma once
/// \file
/// Starts loopback `muflow worker` processes for a topology's `[[cluster.workers]]` and stops
/// them again (`muflow run --spawn-workers`, tests, a laptop). Workers on other machines are
/// started there by hand or by a cluster manager.

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace muflow::actors::cluster {

/// Worker processes this process started; the destructor stops them (SIGTERM, then SIGKILL
/// after a grace period) and reaps them. One owner thread.
class LaunchedWorkers {
 public:
  /// Starts `binary worker --listen A --exit-with-parent` for each A of `listen` ("HOST:PORT",
  /// port 0 = any free one; the flag stops them when this process dies, even by kill -9, as
  /// long as the calling thread lives) and waits (at most `timeout` each) for its "listening on
  /// HOST:PORT" line. `token` non-empty: the children get it as MUFLOW_CLUSTER_TOKEN (else they
  /// inherit the environment); `extra_args` are added to each command line. Unless they hold
  /// `--threads`, each worker gets `--threads max(1, hardware threads / listen.size())`: they share
  /// this machine's cores (more busy threads than cores slow every stage). Their stderr is this
  /// process's. Errors: Internal when a process cannot be started, Unavailable when one exits
  /// or stays silent before it listens (the started ones are stopped again).
  static absl::StatusOr<std::unique_ptr<LaunchedWorkers>> launch(
      const std::string& binary, const std::vector<std::string>& listen,
      const std::string& token = {}, const std::vector<std::string>& extra_args = {},
      std::chrono::milliseconds timeout = std::chrono::seconds(30));

  ~LaunchedWorkers();
  LaunchedWorkers(const LaunchedWorkers&) = delete;
  LaunchedWorkers& operator=(const LaunchedWorkers&) = delete;

  /// "HOST:PORT" each worker listens on (the port it bound), in `listen`'s order.
  const std::vector<std::string>& addresses() const { return addresses_; }
  /// Process id of worker `i` (e.g. to kill it in a fault test).
  pid_t pid(size_t i) const { return pids_.at(i); }
  /// Waits for worker `i` to exit after someone else killed it; its exit is then not waited
  /// for again. Returns its wait status.
  int reap(size_t i);

  /// Without waiting: reaps every worker that exited (a crash, `kill -9`) and starts it again
  /// at the address it listened on (same port, arguments and token), so that a driver that
  /// lost it takes it back (ClusterDriverOptions::rejoin_interval). A worker is started again
  /// `min_gap` (at least 1 ms) after it exited, the wait doubling while it keeps dying within
  /// a minute of its start (at most 5 min). Returns one line per worker that exited or was started
  /// again, for the caller's log; a restart that fails (the port taken meanwhile, the binary gone)
  /// is reported there and tried again later. Blocks while a restarted worker starts (at most the
  /// launch timeout).
  std::vector<std::string> restart_exited(
      std::chrono::milliseconds min_gap = std::chrono::seconds(1));

 private:
  LaunchedWorkers() = default;
  // Starts `binary_ worker --listen address` with the shared arguments; its pid, stdout's
  // read end and the address it printed. Errors: as launch's.
  struct Started {
    pid_t pid = 0;
    int stdout_fd = -1;
    std::string address;
  };
  absl::StatusOr<Started> start_one(const std::string& address);

  std::string binary_;
  std::vector<std::string> env_;          // the children's environment (token included)
  std::vector<std::string> shared_args_;  // after `worker --listen A --exit-with-parent`
  std::chrono::milliseconds timeout_{0};
  // [worker]: when it was last started, and the wait before its next restart.
  std::vector<std::chrono::steady_clock::time_point> started_at_;
  std::vector<std::chrono::milliseconds> next_gap_;
  std::vector<std::chrono::steady_clock::time_point> exited_at_;  // 0: running
  std::vector<pid_t> pids_;
  std::vector<int> stdout_fds_;  // read ends of the workers' stdout pipes
  std::vector<std::string> addresses_;
};

/// A fresh cluster secret for workers this process starts: 32 random bytes (OpenSSL), hex.
/// Errors: OpenSSL's RNG failing.
absl::StatusOr<std::string> make_cluster_token();

}  // namespace muflow::actors::cluster
