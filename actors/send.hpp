#pragma once
/// \file
/// A message a stage (or a wiring's expert kernel) hands back to its actor to send.

#include <caf/all.hpp>
#include <cstdint>

namespace muflow::actors {

/// A message a stage sends after it ran (or right away, for an empty iteration).
/// Point-to-point token batches name the destination device and their size: over a timed
/// channel (ctx->channel; sim: the big-switch network) they arrive when the transfer ends; over
/// the in-process channel (cpu), and for a destination on the sending device, at once.
struct Send {
  caf::actor dest;
  caf::message msg;
  int64_t to_device = -1;  ///< device of `dest` for a network transfer; -1 = local message
  int64_t bytes = 0;       ///< payload bytes on the wire
};

}  // namespace muflow::actors
