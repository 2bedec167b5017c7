#pragma once
/// \file
/// The wiring names of the topology file format (`wiring = "..."`) and the tables that belong
/// to one wiring. The parser checks names against these; what a name does is the wiring
/// registry's business (actors/wirings/registry.hpp), and a test keeps both lists equal.

#include <array>
#include <string_view>
#include <utility>

namespace muflow::engine::topology {

/// Wirings this build implements; the parser rejects any other name and lists these in its
/// message (registration order of actors/wirings/registry.cpp).
inline constexpr std::array<std::string_view, 6> kKnownWirings = {
    "sync", "async", "harmoeny", "moeshard", "exflow", "async-replicated"};

/// Topology tables private to one wiring: {table, wiring}. A table given under another
/// wiring is an error naming the table.
inline constexpr std::array<std::pair<std::string_view, std::string_view>, 1> kWiringTables = {
    {{"harmoeny", "harmoeny"}}};

}  // namespace muflow::engine::topology
