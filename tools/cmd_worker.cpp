// `muflow worker --listen HOST:PORT [--token-file FILE] [--allow-remote]`: a process of a
// muflow cluster (actors/cluster/worker.hpp).
#include <cstdio>
#include <memory>
#include <string>

#include "actors/cluster/worker.hpp"
#include "tools/commands.hpp"

namespace muflow::tools {

Command add_worker_command(CLI::App& app) {
  struct Options {
    std::string listen = "127.0.0.1:0", token_file;
    bool allow_remote = false;
    int64_t max_message_mib = 1024;
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
  app.add_option("--max-message-mib", o->max_message_mib,
                 "largest data-plane message accepted, MiB (larger ones are rejected)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 14))
      ->capture_default_str();
  return [o]() {
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
    return actors::cluster::run_worker(w);
  };
}

}  // namespace muflow::tools
