#pragma once
/// \file
/// What `muflow run` and `muflow serve` do for a topology with `[[cluster.workers]]` (#18):
/// start its workers as loopback processes (`--spawn-workers`) and give the Server the
/// cluster driver that joins them.

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "actors/cluster/cluster_driver.hpp"
#include "actors/cluster/worker_launcher.hpp"
#include "actors/server.hpp"
#include "engine/topology/topology.hpp"

namespace muflow::tools {

/// The data plane's message limit (MiB) of the driver and of `muflow worker` unless given.
inline constexpr int64_t kDefaultMaxMessageMib =
    actors::cluster::ClusterDriverOptions{}.max_message_bytes >> 20;

/// Starts `topo`'s workers as loopback `muflow worker` processes of this binary (with
/// `--exit-with-parent`) and points `topo`'s worker addresses at the ports they bound.
/// Without a cluster token ($MUFLOW_CLUSTER_TOKEN, `[cluster] token_file`) a random one is
/// made and put in this process's environment (the driver reads it there) and theirs.
/// Unless `quiet`, prints one line per worker on stderr, prefixed with `who` ("muflow run").
/// Each gets `--max-message-mib max_message_mib` (the driver's limit, so the two agree).
/// Errors: InvalidArgument for a worker address that is not a loopback HOST:PORT; the
/// launcher's (a worker that does not start or print its port, named). The workers stop when
/// the returned object is destroyed.
absl::StatusOr<std::unique_ptr<actors::cluster::LaunchedWorkers>> spawn_workers(
    engine::topology::Topology& topo, bool quiet, const std::string& who,
    int64_t max_message_mib = kDefaultMaxMessageMib);

/// Gives `server` the cluster driver for `topo`'s workers (nothing when it lists none), with
/// `options` (heartbeat timeout, rejoin interval). Errors: make_cluster_driver's (an address
/// that does not parse, the cluster secret's).
absl::Status attach_workers(actors::Server& server, const engine::topology::Topology& topo,
                            const actors::cluster::ClusterDriverOptions& options = {});

/// The `--heartbeat-timeout-ms` option of `muflow run` and `muflow serve` (ms, 0 = off),
/// bound to `*ms` (which keeps its default unless given).
void add_heartbeat_option(CLI::App& app, int64_t* ms);

/// The `--rejoin-interval-ms` option of `muflow serve` (ms, 0 = off;
/// ClusterDriverOptions::rejoin_interval), bound to `*ms` (which keeps its default unless
/// given).
void add_rejoin_option(CLI::App& app, int64_t* ms);

/// The `--max-message-mib` option of `muflow run` and `muflow serve` (MiB, 1..16384): the
/// driver's ClusterDriverOptions::max_message_bytes, passed on to the workers that
/// `--spawn-workers` starts; bound to `*mib` (kDefaultMaxMessageMib unless given).
void add_max_message_option(CLI::App& app, int64_t* mib);

}  // namespace muflow::tools
