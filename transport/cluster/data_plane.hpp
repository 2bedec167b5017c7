#pragma once
/// \file
/// The UCX data plane of one muflow process (#18): tagged messages of raw bytes to and from
/// the other processes of a cluster. What a message means is the caller's (frame.hpp gives
/// the framing); this class moves bytes and bounds what it accepts.
///
/// - **Connection.** Each process creates a `DataPlane` (one per driver attempt in the cluster
///   runtime: actors/cluster/README.md), gives its `address()` (UCX worker address bytes) to
///   its peers over the authenticated control plane, and `connect`s to theirs. No listening
///   socket is opened here: a peer can reach this worker only with an address handed out by
///   the control plane. On one host UCX picks shared memory (posix, sysv), across hosts TCP
///   (or InfiniBand where UCX has it).
/// - **A dead peer on the same host is not fatal** (#18), where UCX 1.13 would abort: unless
///   the user set them, messages of every size go eagerly (`UCX_RNDV_THRESH=inf`) and
///   cross-memory attach is left out (`UCX_TLS=^cma`), because a receiver's rendezvous fetch
///   from a sender that died failed in process_vm_readv, which UCX takes for fatal on endpoints
///   without its peer error handling (transport/cluster/README.md says why they have none, and
///   what is left for InfiniBand between hosts).
/// - **Threads.** One progress thread progresses the UCX worker (UCS_THREAD_MODE_SERIALIZED:
///   one thread in UCX at a time, under a mutex it never holds while asleep). It sleeps in
///   `poll(2)` on the worker's event fd (UCX wakeup mode) and on an eventfd for commands;
///   after activity it polls on for at most `Options::spin_us` before sleeping, so an idle
///   plane takes no CPU (unbounded busy polling starves a 2-core machine's actors:
///   TOOLCHAIN.md). `send` and `connect` may be called from any thread. `connect` queues a
///   command; `send` posts the message itself when no other thread is in UCX and no command
///   is queued (`Options::inline_sends`), else queues it, and the progress thread completes it.
/// - **Receive.** Every message is probed first (`ucp_tag_probe_nb`), its length checked
///   against `max_message_bytes` before a buffer is allocated; an oversized message is drained
///   into a zero-byte buffer (UCX reports it truncated), counted as rejected, logged and
///   reported to the `Rejected` callback, and never delivered. Accepted messages go to the
///   `Handler` on the progress thread, per sender in the order they were sent (UCX tag
///   matching is ordered per endpoint); messages of different senders are not ordered with
///   each other, so a sender that died mid-message holds back only its own later messages,
///   never another process's (until `drop_peer` abandons them).
/// - **Tag.** A message's UCX tag is its sender's process index (`Options::process`); the
///   handler gets it, so a receiver can check it against the frame it parses.
/// - **Errors** are `absl::Status`: UCX failures name the UCX call and its status string.
///
/// Source: UCX 1.13 API (ucp.h): tag send/recv with probe, `ucp_worker_arm` /
/// `ucp_worker_get_efd` event-driven progress; measured figures in bench/README.md.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace muflow::transport::cluster {

/// Counters of one data plane since it was created (monotonic, but for the `receives_pending`
/// gauge; read from any thread).
struct DataPlaneStats {
  uint64_t sent_messages = 0;
  uint64_t sent_bytes = 0;
  uint64_t received_messages = 0;
  uint64_t received_bytes = 0;
  uint64_t rejected_messages = 0;  ///< oversized (never delivered) or failed receives
  uint64_t failed_sends = 0;
  /// Messages of dropped peers that UCX had matched but that were never delivered
  /// (`drop_peer`: one unfinished, the peer died mid-message, and those queued behind it).
  uint64_t abandoned_receives = 0;
  /// Now, not a counter: messages UCX has matched that are not delivered or abandoned yet.
  int64_t receives_pending = 0;
  /// Sends taken on the caller's thread (`Options::inline_sends`: posted to UCX there, or
  /// failed there, e.g. to an unknown peer); the others were handed to the progress thread.
  uint64_t posted_inline = 0;
};

/// One received message: its sender's tag and its bytes (owned; move them anywhere).
struct Received {
  uint64_t tag = 0;  ///< the sender's process index (unverified: check it against the frame)
  std::unique_ptr<char[]> bytes;
  size_t size = 0;
  std::span<const char> view() const { return {bytes.get(), size}; }
};

class DataPlane {
 public:
  struct Options {
    uint32_t process = 0;  ///< this process's index in the cluster; the tag of its messages
    /// Largest message accepted (bytes); larger ones are drained and rejected.
    int64_t max_message_bytes = int64_t{1} << 31;
    std::string name = "data-plane";  ///< for log lines
    /// After activity the progress thread keeps polling this long (µs) before it sleeps:
    /// the next message of a stream is usually that close, and a wakeup costs tens of µs.
    /// 0 = sleep at once (the default). Spinning pays only where a core is free for it: with
    /// more busy threads than cores (decode in loopback workers on 2 cores) the spin of each
    /// process's progress thread is taken from the stages' GEMMs (bench/README.md, #18:
    /// decode 370-376 tok/s with 50 µs, 395-399 with 0). Bounded, so an idle plane takes no CPU.
    int64_t spin_us = 0;
    /// `send` posts the message from the calling thread when no other thread is in UCX and no
    /// command is queued, instead of handing it to the progress thread (whose wakeup on busy
    /// cores puts 0.1-2 ms on every message's path: bench/README.md, #18). false: always
    /// hand it over (as before; for comparisons).
    bool inline_sends = true;
  };
  /// Called on the progress thread for every accepted message; must not block for long
  /// (post the message to an actor and return).
  using Handler = std::function<void(Received&&)>;
  /// Called on the progress thread for every message drained because it was larger than
  /// `max_message_bytes`: `tag` its sender's tag, `bytes` its length, `why` the reason. Its
  /// content is gone and its sender is alive, so a runtime whose run needed it fails that run
  /// (actors/cluster: it would otherwise wait for it forever). Not called for a failed receive
  /// (logged and counted only: a transport error such as a sender that died mid-message, which
  /// the runtime's liveness checks handle). Must not block for long.
  using Rejected = std::function<void(uint64_t tag, uint64_t bytes, const std::string& why)>;
  /// Called when a send completed (ok) or failed: on the progress thread, or inside `send`
  /// on the caller's thread when UCX finished (or refused) it there, before `send` returns
  /// (so it must not take a lock the caller of `send` holds). A `send` from it is queued.
  using SendDone = std::function<void(absl::Status)>;

  /// Creates the UCX context and worker (tag matching, wakeup) and starts the progress
  /// thread. Sets `UCX_RNDV_THRESH=inf` and `UCX_TLS=^cma` for its context, each unless that
  /// variable is set (a dead peer on this host is then not fatal: file comment). `rejected`
  /// (optional) hears of every oversized message drained. Errors: UCX
  /// initialisation failures, among them a UCX_ variable UCX does not accept
  /// (absl::Unavailable, naming the call).
  static absl::StatusOr<std::unique_ptr<DataPlane>> create(Options options, Handler handler,
                                                           Rejected rejected = {});

  /// Stops the progress thread after in-flight sends finished (at most ~2 s), closes the
  /// endpoints and releases UCX. Handlers are not called after it returns.
  ~DataPlane();
  DataPlane(const DataPlane&) = delete;
  DataPlane& operator=(const DataPlane&) = delete;

  /// This worker's UCX address, to hand to peers (opaque bytes, a few hundred). Any thread.
  const std::vector<char>& address() const { return address_; }

  /// Opens an endpoint to process `peer` at `address` (its `address()`), replacing any
  /// earlier one. Blocks until the endpoint exists (not until the peer answers). Errors:
  /// empty address, UCX endpoint creation failure, data plane stopped. Any thread.
  absl::Status connect(uint32_t peer, std::span<const char> address);

  /// Sends the concatenation of `parts` to `peer` as one message, kept alive until UCX is
  /// done with it. Several non-empty parts are first copied into one buffer (UCX 1.13 sends
  /// only a contiguous rendezvous zero-copy); one part is moved, so a caller that builds its
  /// message in one buffer (the actor runtime's frames) pays no copy. Returns at once; `done`
  /// (optional) reports completion. Errors, through `done`: unknown peer, UCX send failure, data
  /// plane stopped. Any thread; messages to one peer arrive in the order `send` was called.
  void send(uint32_t peer, std::vector<std::vector<char>> parts, SendDone done = {});

  /// Sends and waits for completion (tests, setup). Any thread except the progress thread.
  absl::Status send_and_wait(uint32_t peer, std::vector<std::vector<char>> parts);
  /// Closes the endpoint to `peer` at once (UCX force close), for a peer that died. Its sends
  /// still in flight end now: each `done` gets absl::Cancelled naming the peer (or UCX's
  /// error), since UCX may never complete a send to a dead peer (rendezvous waits for the
  /// receiver; peer-failure handling, UCP_ERR_HANDLING_MODE_PEER, would cost the shared-memory
  /// transports: UCX 1.13 then picks TCP on one host). They no longer hold up the plane's
  /// shutdown (its ~2 s bound); their buffers live until the UCX worker is destroyed. Later
  /// sends to `peer` fail as to an unknown peer until `connect` names it again. Its messages
  /// received but not delivered yet are abandoned too (counted in
  /// `DataPlaneStats::abandoned_receives`, never delivered): one UCX had not finished (the
  /// peer died mid-message) and those behind it, even when no endpoint to `peer` is open.
  /// Otherwise a no-op for an unknown peer. Blocks until done; any thread except the progress
  /// thread.
  void drop_peer(uint32_t peer);
  /// `drop_peer` for every peer this plane has an endpoint to or undelivered messages from:
  /// for a plane about to be destroyed whose peers' traffic belongs to an attempt that ended
  /// (a worker replacing its plane for a driver's next attempt), so that the destructor does
  /// not wait out its ~2 s bound for sends to a peer that died. Blocks until done; any thread
  /// except the progress thread.
  void drop_all_peers();

  DataPlaneStats stats() const;
  const Options& options() const { return options_; }

  struct Impl;  // UCX handles and the progress thread (data_plane.cpp)

 private:
  DataPlane(Options options, std::vector<char> address, std::unique_ptr<Impl> impl);
  Options options_;
  std::vector<char> address_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace muflow::transport::cluster
