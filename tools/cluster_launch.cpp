#include "tools/cluster_launch.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "actors/cluster/cluster_driver.hpp"
#include "actors/cluster/listen_address.hpp"

namespace muflow::tools {

absl::StatusOr<std::unique_ptr<actors::cluster::LaunchedWorkers>> spawn_workers(
    engine::topology::Topology& topo, bool quiet, const std::string& who, int64_t max_message_mib) {
  std::vector<std::string> listen;
  for (const engine::topology::WorkerSpec& w : topo.workers) {
    absl::StatusOr<actors::cluster::ListenAddress> a =
        actors::cluster::parse_listen_address(w.address);
    if (!a.ok()) return a.status();
    if (!actors::cluster::is_loopback_host(a->host)) {
      return absl::InvalidArgumentError("--spawn-workers starts loopback workers only; " +
                                        w.address +
                                        " is another host's (start `muflow worker` there)");
    }
    listen.push_back(w.address);
  }
  std::string token;
  const char* env = std::getenv("MUFLOW_CLUSTER_TOKEN");
  if (topo.cluster_token_file.empty() && (env == nullptr || *env == '\0')) {
    absl::StatusOr<std::string> made = actors::cluster::make_cluster_token();
    if (!made.ok()) return made.status();
    token = *made;
    ::setenv("MUFLOW_CLUSTER_TOKEN", token.c_str(), 1);
  }
  std::vector<std::string> args = {"--max-message-mib", std::to_string(max_message_mib)};
  if (!topo.cluster_token_file.empty()) {
    args.insert(args.end(), {"--token-file", topo.cluster_token_file});
  }
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) return absl::InternalError("cannot find this program (/proc/self/exe): " + ec.message());
  absl::StatusOr<std::unique_ptr<actors::cluster::LaunchedWorkers>> w =
      actors::cluster::LaunchedWorkers::launch(self, listen, token, args);
  if (!w.ok()) return w.status();
  for (size_t i = 0; i < topo.workers.size(); ++i) {
    topo.workers[i].address = (*w)->addresses()[i];
    if (!quiet) {
      std::fprintf(stderr, "%s: worker %zu (devices %s) started on %s (pid %d)\n", who.c_str(),
                   i + 1, absl::StrJoin(topo.workers[i].devices, ", ").c_str(),
                   topo.workers[i].address.c_str(), static_cast<int>((*w)->pid(i)));
    }
  }
  return w;
}

absl::Status attach_workers(actors::Server& server, const engine::topology::Topology& topo,
                            const actors::cluster::ClusterDriverOptions& options) {
  if (topo.workers.empty()) return absl::OkStatus();
  absl::StatusOr<std::shared_ptr<actors::ProcessGroup>> group =
      actors::cluster::make_cluster_driver(topo, options);
  if (!group.ok()) return group.status();
  server.set_process_group(std::move(*group));
  return absl::OkStatus();
}

void add_heartbeat_option(CLI::App& app, int64_t* ms) {
  app.add_option("--heartbeat-timeout-ms", *ms,
                 "with [[cluster.workers]]: a worker whose data-plane ping stays unanswered "
                 "this long counts as lost (hung, or its machine gone) and its devices move to "
                 "the survivors; raise it over slow links (a large message delays the answer); "
                 "0 turns the heartbeat off (a dead process is still noticed by its connection)")
      ->check(CLI::Range(int64_t{0}, int64_t{3'600'000}))
      ->capture_default_str();
}

void add_max_message_option(CLI::App& app, int64_t* mib) {
  app.add_option("--max-message-mib", *mib,
                 "with [[cluster.workers]]: the largest data-plane message this driver sends or "
                 "accepts, MiB (give the workers the same `muflow worker --max-message-mib`; "
                 "--spawn-workers does); a message of the run above it fails the run with the "
                 "reason")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 14))
      ->capture_default_str();
}

void add_rejoin_option(CLI::App& app, int64_t* ms) {
  app.add_option("--rejoin-interval-ms", *ms,
                 "with [[cluster.workers]]: how often the driver tries to reach a lost worker's "
                 "address again; a worker there that proves the cluster secret (restarted at "
                 "the same HOST:PORT) is taken back with its own devices (the requests in "
                 "flight are re-admitted, outputs unchanged); 0: a lost worker stays lost")
      ->check(CLI::Range(int64_t{0}, int64_t{3'600'000}))
      ->capture_default_str();
}

}  // namespace muflow::tools
