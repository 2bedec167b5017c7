// `muflow worker --listen HOST:PORT [--token-file FILE] [--allow-remote] [--threads N]`: a
// process of a muflow cluster (actors/cluster/worker.hpp).
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "actors/cluster/worker.hpp"
#include "tools/cluster_launch.hpp"
#include "tools/commands.hpp"

namespace muflow::tools {

Command add_worker_command(CLI::App& app) {
  struct Options {
    std::string listen = "127.0.0.1:0", token_file;
    bool allow_remote = false, exit_with_parent = false;
    int64_t max_message_mib = kDefaultMaxMessageMib;
    int64_t threads = 0;
  };
  auto o = std::make_shared<Options>();
  app.add_option("--listen", o->listen,
                 "HOST:PORT of the control plane (CAF middleman); port 0 picks a free one, "
                 "printed on stdout")
      ->capture_default_str();
  app.add_option("--token-file", o->token_file,
                 "file holding the cluster secret (default: $MUFLOW_CLUSTER_TOKEN)");
  app.add_flag("--allow-remote", o->allow_remote,
               "allow a non-loopback --listen address (peers must still prove the secret)");
  app.add_flag("--exit-with-parent", o->exit_with_parent,
               "stop (as on SIGTERM) when the process that started this one dies, even by "
               "kill -9 (`muflow run --spawn-workers` and the tests pass it)");
  app.add_option("--max-message-mib", o->max_message_mib,
                 "largest data-plane message sent or accepted, MiB (a message of a run above it "
                 "fails the run with the reason; give the driver the same)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 14))
      ->capture_default_str();
  app.add_option("--threads", o->threads,
                 "scheduler threads for the hosted devices' stages; 0 = the machine's hardware "
                 "threads (loopback workers on one machine should split its cores: "
                 "`muflow run --spawn-workers` does)")
      ->check(CLI::Range(int64_t{0}, int64_t{1024}))
      ->capture_default_str();
  return [o]() {
    // Linux: SIGTERM on the death of the parent (strictly: of the thread that started this
    // process); a parent already gone has made this process a child of init or a subreaper.
    if (o->exit_with_parent) {
      const pid_t parent = ::getppid();
      if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || ::getppid() != parent || parent == 1) {
        std::fprintf(stderr, "muflow worker: --exit-with-parent: the parent is gone\n");
        return 1;
      }
    }
    auto listen = actors::cluster::parse_listen_address(o->listen);
    if (!listen.ok()) {
      std::fprintf(stderr, "muflow worker: --listen: %s\n",
                   std::string(listen.status().message()).c_str());
      return 2;
    }
    actors::cluster::WorkerOptions w;
    w.listen = *listen;
    w.allow_remote = o->allow_remote;
    w.token_file = o->token_file;
    w.max_message_bytes = o->max_message_mib << 20;
    w.threads = o->threads;
    return actors::cluster::run_worker(w);
  };
}

}  // namespace muflow::tools
