#pragma once
/// \file
/// Whether something accepts TCP connections at HOST:PORT, within a bounded time (#18, rejoin):
/// the driver asks before it lets CAF's middleman connect to a lost worker's address, because
/// the middleman connects with a blocking connect(2) on its own thread, which a host that drops
/// packets holds for the kernel's SYN timeout (~2 min on Linux) while every later middleman
/// request (and the actor system's shutdown) waits behind it.

#include <chrono>
#include <cstdint>
#include <string>

namespace muflow::actors::cluster {

/// True when a TCP connection to `host`:`port` is accepted within `timeout` (a non-blocking
/// connect(2) polled for at most `timeout` per address `host` resolves to; the connection is
/// closed at once). False when refused, unreachable, timed out, or `host` does not resolve
/// (name resolution itself is getaddrinfo's and not bounded here). Blocks the calling thread
/// for at most about `timeout` per address: call it from a thread of its own. Any thread.
bool tcp_accepts(const std::string& host, uint16_t port, std::chrono::milliseconds timeout);

}  // namespace muflow::actors::cluster
