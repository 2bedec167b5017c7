#pragma once
/// \file
/// A handle for an actor of the run that lives in another process (#18): what is sent to it
/// is encoded (actor_codec.hpp) and sent over the UCX data plane to that process, in the
/// sender's thread, so the messages one actor sends to one process leave (and arrive) in the
/// order it sent them, whichever actors they are for. Like CAF's own remote-actor proxies it
/// enqueues synchronously instead of having a mailbox.

#include <atomic>
#include <caf/all.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "actors/process_layout.hpp"
#include "transport/cluster/data_plane.hpp"
#include "transport/cluster/frame.hpp"

namespace muflow::actors::cluster {

/// Frames actor messages for the data plane of this process, until `close`. Thread-safe
/// (any actor's thread).
///
/// Reports for the coordinator (`is_report`: busy time of each stage run, a barrier's
/// metrics, expert fetches) are not sent one by one: each data-plane message costs a wakeup of
/// the sender's and the receiver's progress threads, and a stage run's busy report alone was a
/// third of a worker's messages. They wait here and leave together (one kReports message,
/// actor_codec.hpp) right before this process's next other message, to whichever process (so
/// they precede what their actors sent next, e.g. the sampled rows they were measured for, and
/// a worker that sends only to other workers does not keep them), once kMaxPendingReports
/// wait, when the oldest waited kReportsFlushAfter at the next report or `flush_aged` (a
/// worker calls it on each heartbeat ping), and at `close`.
class Outbox {
 public:
  static constexpr size_t kMaxPendingReports = 64;
  static constexpr std::chrono::milliseconds kReportsFlushAfter{20};

  /// `plane` must stay alive until `close` returned. `run`: the run attempt every frame is
  /// stamped with (frame.hpp; the driver's number from cl_setup), so that a receiver hosting
  /// another attempt drops it.
  Outbox(transport::cluster::DataPlane* plane, uint32_t self, uint64_t run)
      : plane_(plane), self_(self), run_(run) {}
  /// Encodes `content` for the actor at `to` in process `process` and sends it. Errors: those
  /// of encode_actor_message (nothing is sent); ResourceExhausted for a frame larger than the
  /// data plane's `max_message_bytes` (nothing is sent: the receiver, whose limit is the same
  /// in a cluster configured alike, would drain and drop it); FailedPrecondition after `close`.
  /// A send that UCX fails later is logged.
  absl::Status send(uint32_t process, const ActorAddress& to,
                    const caf::type_erased_tuple& content);
  /// Sets what `undeliverable` does: the cluster runtime fails the run (cluster_layout.hpp,
  /// fail_run), which cannot finish without the message; `fail_run` returns whether it did
  /// (false: no run to fail yet, or the failure could not be sent). Any thread.
  void on_undeliverable(std::function<bool(const std::string&)> fail_run);
  /// A message of the run could not be sent (`what` says which and why): logged, and handed
  /// to the `on_undeliverable` callback until it failed the run once (later ones of a run
  /// that is failing are only logged). Call with no lock of this outbox held (a remote
  /// handle, after `send` returned its error). Any thread.
  void undeliverable(const std::string& what);
  /// Sends a liveness probe (a kPing frame, frame_kinds.hpp) to process `process`; it answers
  /// kPong. Errors: FailedPrecondition after `close`. Any thread.
  absl::Status ping(uint32_t process);
  /// Sends the reports that waited at least kReportsFlushAfter. Any thread.
  void flush_aged();
  /// Sends the reports that still wait; later sends (reports too) fail with
  /// FailedPrecondition; after it returns the plane may be destroyed.
  void close();
  uint32_t self() const { return self_; }

 private:
  struct PendingReports {
    std::vector<caf::message> reports;
    std::chrono::steady_clock::time_point oldest;
  };
  // A frame before it is handed over: its prefix's fields (sequence not yet set) and the
  // whole message, the prefix's 40 bytes left at its front (written at hand-over), so that
  // it leaves as one contiguous buffer (so that UCX's rendezvous is zero-copy: data_plane.hpp).
  struct Framed {
    transport::cluster::FramePrefix prefix;
    std::vector<char> bytes;
  };
  // The frame of `content` for the actor at `to`.
  absl::StatusOr<Framed> frame(const ActorAddress& to, const caf::type_erased_tuple& content);
  // Numbers a frame (frame.hpp: per destination, from 0, in the order frames reach the plane)
  // and hands it to the data plane. Call with reports_mu_ held. Errors: FailedPrecondition
  // after `close`.
  absl::Status hand_over(uint32_t process, const ActorAddress& to, Framed f);
  // Sends the waiting reports (with `aged_at`: those whose oldest waited kReportsFlushAfter
  // then), one message per process. Call with reports_mu_ held.
  void flush_locked(std::optional<std::chrono::steady_clock::time_point> aged_at);

  std::shared_mutex mu_;  // shared: a send in progress; exclusive: close
  transport::cluster::DataPlane* plane_;
  const uint32_t self_;
  const uint64_t run_;
  std::map<uint32_t, uint64_t>
      next_sequence_;  // process → its next frame's sequence; under reports_mu_
  // Held from taking waiting reports until their frame and the message that follows them
  // are handed to the plane, so nothing overtakes them; ordered before mu_.
  std::mutex reports_mu_;
  std::map<uint32_t, PendingReports> reports_;  // process → its waiting reports
  bool closed_ = false;                         // under reports_mu_
  std::mutex fail_mu_;
  std::function<bool(const std::string&)> fail_run_;  // under fail_mu_
  bool failed_ = false;  // under fail_mu_: fail_run_ failed the run once
};

/// A handle whose messages go to the actor at `to` in process `process` through `outbox`.
/// An exit message terminates the handle (its monitors get a down message) and nothing is
/// sent; a message that cannot be sent (no wire form, larger than the data plane's limit) is
/// dropped and reported to `outbox`'s `undeliverable`, which fails the run. Not registered with
/// `sys` (await_all_actors_done does not wait for it).
caf::actor make_remote_actor(caf::actor_system& sys, std::shared_ptr<Outbox> outbox,
                             uint32_t process, const ActorAddress& to);

}  // namespace muflow::actors::cluster
