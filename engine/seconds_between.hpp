#pragma once
/// \file
/// The wall-clock interval between two steady-clock instants, in seconds: what the serving
/// code reports (TTFT, ITL, recovery times) and what the planners' time budgets count.

#include <chrono>

namespace muflow::engine {

/// `to - from` in seconds (negative when `to` is earlier). Thread-safe (pure).
inline double seconds_between(std::chrono::steady_clock::time_point from,
                              std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace muflow::engine
