#pragma once
/// \file
/// The driver's side of a run that spans processes (#18): the `ProcessGroup` a Server uses
/// for a topology with `[[cluster.workers]]`. For each run it creates the driver's UCX data
/// plane (process 0), joins every worker (driver_link.hpp: the cluster secret's
/// challenge–response both ways), hands each the topology's text so that it builds the same
/// wiring and spawns the devices it hosts, and stops them when the run ends. While a run is
/// started it monitors every worker's gate and pings every worker over the data plane: a worker
/// that dies, or stops answering pings (ClusterDriverOptions::heartbeat_timeout), fails the run
/// at once (`lost_workers`), and later runs host its devices on the survivors (Server::run
/// re-admits the run's unfinished requests: server.hpp). A lost worker that can be reached
/// again and proves the secret takes its devices back in a later run (`returned_workers`).

#include <chrono>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "actors/process_layout.hpp"
#include "engine/topology/topology.hpp"

namespace muflow::actors::cluster {

struct ClusterDriverOptions {
  /// Per handshake step (hello, auth, join) with each worker.
  std::chrono::milliseconds join_timeout{10'000};
  /// For a worker to parse the topology, load the model and spawn its devices.
  std::chrono::milliseconds setup_timeout{300'000};
  /// For a worker to stop the run's actors.
  std::chrono::milliseconds stop_timeout{10'000};
  /// While a run is started the driver pings every live worker over the data plane this often
  /// (a kPing frame, answered by the worker's progress thread) ...
  std::chrono::milliseconds heartbeat_interval{250};
  /// ... and counts a worker as lost, as if its process had died, once a ping stays
  /// unanswered this long (any data-plane frame from the worker answers it; the time runs from
  /// the ping, so a late watcher loses nobody): a hung process or a peer whose machine lost
  /// power keeps its TCP connection open, so CAF's monitor alone would notice it only after
  /// TCP's timeouts (minutes). A message larger than the link moves in this time delays the
  /// answer: raise it for slow links. 0: no heartbeat (the monitor alone).
  std::chrono::milliseconds heartbeat_timeout{1'500};
  /// While a run is started the driver tries to reach each lost worker's address again this
  /// often (from the gate watcher: a TCP connect bounded by 1 s on a thread of its own, then
  /// the handshake, each step bounded by `join_timeout`). A worker there that proves the
  /// cluster secret (restarted at the same HOST:PORT, or a hung one that resumed) is listed in
  /// `returned_workers` and hosts its own devices again from the next open (a ServingEngine
  /// replaces its wiring at once); one lost again within 60 s of that waits this x 2^failures
  /// (at most 5 min) before the next try. 0: a lost worker stays lost for the group's life.
  std::chrono::milliseconds rejoin_interval{1'000};
  /// The largest data-plane message (bytes) the driver sends or accepts, as a worker's
  /// `--max-message-mib` (the same default, 1 GiB; `muflow run/serve --max-message-mib`). A
  /// run's message above it fails the run with the reason: one the driver would send is
  /// refused before it is sent, one it receives is drained and dropped
  /// (transport/cluster/data_plane.hpp).
  int64_t max_message_bytes = int64_t{1} << 30;
};

/// A process group for `topology`'s workers (their addresses as listed; the topology must
/// carry its TOML text: parsed from a file or string). The cluster secret comes from
/// `[cluster] token_file` or else `$MUFLOW_CLUSTER_TOKEN` and is read here. Errors:
/// InvalidArgument for a topology without workers or without its text, a worker address
/// that is not HOST:PORT with a port above 0; the secret's errors (ClusterSecret::load).
/// The group serves one run at a time, from the thread that runs it.
absl::StatusOr<std::shared_ptr<ProcessGroup>> make_cluster_driver(
    const engine::topology::Topology& topology, ClusterDriverOptions options = {});

}  // namespace muflow::actors::cluster
