#pragma once
/// \file
/// Atoms of the cluster control plane (CAF middleman, #18 item 2): the handshake between a
/// driver and a worker's gate actor. Payloads are CAF built-in types only (std::string holds
/// raw bytes: nonces, proofs, UCX addresses), so no node registers message types for them.
///
/// Handshake (worker = acceptor, driver = connector; cluster_secret.hpp has the proof):
/// 1. driver → gate `(cl_hello)` → nonce n_w (32 bytes)
/// 2. driver → gate `(cl_auth, prove(n_w, "connector"), n_d)` → `prove(n_d, "acceptor")`,
///    or an error after which the gate answers nothing else from that node
/// 3. driver → gate `(cl_join, process index, driver's UCX address)` → worker's UCX address
///    (only from an authenticated node)
///
/// A run (only from an authenticated, joined node; each answers "" or an error):
/// 4. `(cl_setup, topology TOML text, its base folder, every process's UCX address, device
///    map, trace max events, run number)`: the worker parses the same topology, loads the
///    model (or keeps the one it loaded for the same text), connects to the other workers (an
///    empty address: a worker the driver lost) and spawns the devices the device map gives its
///    process index (the map: `[[cluster.workers]]`, or its re-placement after a lost worker;
///    cluster_layout.hpp's `format_device_processes`); it records a trace of its devices when
///    the trace cap is >= 0 (the driver's recorder cap), none when -1; the run number (u64,
///    > 0, new for each attempt of the driver) stamps every data-plane frame of the run both
///    ways, and a frame with another is not delivered (transport/cluster/frame.hpp)
/// 5. `(cl_start)`: the run's clock starts; actor messages for it are delivered from now on
/// 6. `(cl_stop)`: the worker stops the run's actors (waits for them) and forgets the run,
///    keeping its trace until the next setup
/// 7. `(cl_trace)` → the stopped run's trace (`TraceRecorder::to_json`, times in seconds since
///    the worker's cl_start) as JSON text, once; "" when it recorded none
/// 8. `(cl_stats)` → `(KV-cache bytes, queued attention, expert, sampler tokens)` (four
///    int64) of the stages the worker hosts in the started run (zeros without one): what a
///    long-lived driver's ServingEngine::stats adds up

#include <caf/atom.hpp>

namespace muflow::actors::cluster {

using hello_atom = caf::atom_constant<caf::atom("clhello")>;
using auth_atom = caf::atom_constant<caf::atom("clauth")>;
using join_atom = caf::atom_constant<caf::atom("cljoin")>;
using setup_atom = caf::atom_constant<caf::atom("clsetup")>;
using run_start_atom = caf::atom_constant<caf::atom("clstart")>;
using run_stop_atom = caf::atom_constant<caf::atom("clstop")>;
using run_trace_atom = caf::atom_constant<caf::atom("cltrace")>;
using run_stats_atom = caf::atom_constant<caf::atom("clstats")>;
/// The driver's gate watcher, to itself: time to ping the workers (not sent to a worker).
using heartbeat_atom = caf::atom_constant<caf::atom("clbeat")>;
/// The driver's gate watcher, to itself: time to reach the lost workers again (rejoin).
using rejoin_atom = caf::atom_constant<caf::atom("clrejoin")>;

/// Role strings of the two proofs (never equal: a proof cannot be reflected).
inline constexpr const char* kConnectorRole = "connector";
inline constexpr const char* kAcceptorRole = "acceptor";

}  // namespace muflow::actors::cluster
