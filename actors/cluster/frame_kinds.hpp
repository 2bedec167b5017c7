#pragma once
/// \file
/// Kinds of data-plane frames between muflow processes (transport/cluster/frame.hpp's `kind`).
/// The numbers are part of the wire format: never reuse one.

#include <cstdint>

namespace muflow::actors::cluster {

enum class FrameKind : uint16_t {
  kPing = 1,  ///< liveness probe: the receiver answers kPong with the same header and payload
  kPong = 2,  ///< answer to kPing
  /// a message for an actor of the run in the receiving process (actor_codec.hpp)
  kActorMessage = 3,
};

}  // namespace muflow::actors::cluster
