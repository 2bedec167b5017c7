#pragma once
/// \file
/// A handle for an actor of the run that lives in another process (#18): what is sent to it
/// is encoded (actor_codec.hpp) and sent over the UCX data plane to that process, in the
/// sender's thread, so the messages one actor sends to one process leave (and arrive) in the
/// order it sent them, whichever actors they are for. Like CAF's own remote-actor proxies it
/// enqueues synchronously instead of having a mailbox.

#include <atomic>
#include <caf/all.hpp>
#include <cstdint>
#include <memory>
#include <shared_mutex>

#include "actors/process_layout.hpp"
#include "transport/cluster/data_plane.hpp"

namespace muflow::actors::cluster {

/// Frames actor messages for the data plane of this process, until `close`. Thread-safe
/// (any actor's thread).
class Outbox {
 public:
  /// `plane` must stay alive until `close` returned.
  Outbox(transport::cluster::DataPlane* plane, uint32_t self) : plane_(plane), self_(self) {}
  /// Encodes `content` for the actor at `to` in process `process` and sends it. Errors: those
  /// of encode_actor_message (nothing is sent); FailedPrecondition after `close`. A send that
  /// UCX fails later is logged.
  absl::Status send(uint32_t process, const ActorAddress& to,
                    const caf::type_erased_tuple& content);
  /// Sends a liveness probe (a kPing frame, frame_kinds.hpp) to process `process`; it answers
  /// kPong. Errors: FailedPrecondition after `close`. Any thread.
  absl::Status ping(uint32_t process);
  /// Later sends fail with FailedPrecondition; after it returns the plane may be destroyed.
  void close();
  uint32_t self() const { return self_; }

 private:
  std::shared_mutex mu_;  // shared: a send in progress; exclusive: close
  transport::cluster::DataPlane* plane_;
  const uint32_t self_;
  std::atomic<uint64_t> sequence_{0};
};

/// A handle whose messages go to the actor at `to` in process `process` through `outbox`.
/// An exit message terminates the handle (its monitors get a down message) and nothing is
/// sent; a message without a wire form is logged and dropped. Not registered with `sys`
/// (await_all_actors_done does not wait for it).
caf::actor make_remote_actor(caf::actor_system& sys, std::shared_ptr<Outbox> outbox,
                             uint32_t process, const ActorAddress& to);

}  // namespace muflow::actors::cluster
