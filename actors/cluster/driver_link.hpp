#pragma once
/// \file
/// The driver's side of joining a worker (#18): reach its gate over CAF's middleman, pass the
/// cluster secret's challenge–response both ways (control_messages.hpp), and join it to the
/// driver's UCX data plane under a process index.

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/cluster/listen_address.hpp"
#include "transport/cluster/cluster_secret.hpp"
#include "transport/cluster/data_plane.hpp"

namespace muflow::actors::cluster {

/// A worker the driver joined.
struct WorkerLink {
  uint32_t process = 0;           ///< its process index on the data plane
  std::vector<char> ucx_address;  ///< its data plane's address (the driver connected to it)
  caf::actor gate;                ///< its gate actor (CAF middleman proxy): the run's messages
};

/// The driver's answer to a gate's challenge (the `auth` step): its proof of the secret, and
/// its own nonce for the worker's proof.
struct AuthAnswer {
  std::string proof;
  transport::cluster::Nonce nonce{};
};

/// Answers the challenge a gate sent to `hello` (its nonce, as bytes). Errors:
/// PermissionDenied for a challenge of the wrong size (`where` names the worker); OpenSSL's
/// RNG failing. Any thread.
absl::StatusOr<AuthAnswer> answer_challenge(const transport::cluster::ClusterSecret& secret,
                                            const std::string& challenge, const std::string& where);

/// True when `proof` (the gate's answer to `auth`) proves the secret for `answer`'s nonce.
bool worker_proved(const transport::cluster::ClusterSecret& secret, const AuthAnswer& answer,
                   const std::string& proof);

/// Joins the worker at `address` as data-plane process `process` (>= 1; 0 is the driver).
/// `sys` must have loaded `caf::io::middleman`; `plane` is the driver's data plane (process 0).
/// Blocks for at most `timeout` per step. Errors: Unavailable (no worker there, or it did not
/// answer), PermissionDenied (the worker refused this secret, or failed to prove its own: the
/// two processes do not share MUFLOW_CLUSTER_TOKEN / --token-file), Internal (UCX). Each
/// message names the address. Any thread but an actor's.
absl::StatusOr<WorkerLink> join_worker(
    caf::actor_system& sys, const ListenAddress& address,
    const transport::cluster::ClusterSecret& secret, uint32_t process,
    transport::cluster::DataPlane& plane,
    std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace muflow::actors::cluster
