#pragma once
/// \file
/// `muflow worker`: a process that joins a muflow cluster (#18 items 1–4).
///
/// What it does: publishes a **gate** actor through CAF's middleman (the control plane) on
/// `--listen HOST:PORT`; a driver must pass the cluster secret's challenge–response
/// (control_messages.hpp) before the gate answers anything else; after that the driver
/// `join`s it to the UCX data plane (transport/cluster/data_plane.hpp) under a process index
/// and sets up runs on it: the worker parses the driver's topology, loads its model and spawns
/// the devices `[[cluster.workers]]` gives its process (Server::host_share), until the driver
/// stops the run. On the data plane the worker checks every frame (frame.hpp: prefix, limits,
/// that its claimed source matches the UCX tag), delivers actor messages to its actors
/// (cluster_layout.hpp) and answers pings; anything malformed is rejected with a logged error,
/// never trusted, and fails the run it was for.
///
/// Security: binds 127.0.0.1 unless told otherwise; any other address needs
/// `allow_remote` (`--allow-remote`). The secret comes from `--token-file` or
/// $MUFLOW_CLUSTER_TOKEN; a worker without one does not start.

#include <cstdint>
#include <functional>
#include <string>

#include "actors/cluster/listen_address.hpp"

namespace muflow::actors::cluster {

struct WorkerOptions {
  ListenAddress listen{"127.0.0.1", 0};
  bool allow_remote = false;  ///< permit a non-loopback `listen.host`
  std::string token_file;     ///< empty: $MUFLOW_CLUSTER_TOKEN
  /// Largest data-plane message accepted (bytes); larger ones are drained and rejected.
  int64_t max_message_bytes = int64_t{1} << 30;
  /// Scheduler threads for the hosted devices' stages (CAF work sharing, an actor system of
  /// their own; the gate and CAF's middleman have two more threads in the control system,
  /// asleep while no run is set up or stopped); 0 = the machine's hardware threads. Loopback workers sharing one machine should split its cores
  /// (LaunchedWorkers does): more busy threads than cores slow every stage down.
  int64_t threads = 0;
};

/// Runs a worker until SIGINT or SIGTERM. Prints "muflow worker: listening on HOST:PORT"
/// on stdout once the gate is published (PORT is the one bound when `listen.port` was 0).
/// Returns the process exit code: 0 after a signal, 2 for bad options (non-loopback host
/// without allow_remote, no or short secret), 1 when publishing fails; each error is printed
/// on stderr with what to do. Call from the main thread (it blocks SIGINT/SIGTERM to wait).
int run_worker(const WorkerOptions& options);

}  // namespace muflow::actors::cluster
