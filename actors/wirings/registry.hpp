#pragma once
/// \file
/// The registry of wirings: maps the topology's `wiring = "..."` to its Wiring. The one place
/// (with actors/wirings/*) where wiring names mean something; engine/topology/topology checks the
/// file's names against engine::topology::kKnownWirings, which a test keeps equal to this list.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/wirings/wiring.hpp"

namespace muflow::actors {

/// The wiring named `name`. Errors: Unimplemented naming the known wirings.
/// Thread-safe (the wirings are immutable statics).
absl::StatusOr<const Wiring*> find_wiring(std::string_view name);

/// Names of the wirings this build can run, in registration order.
std::vector<std::string> available_wirings();

/// Names of the wirings whose traits satisfy `accepts`, quoted and joined for a message:
/// `"sync" or "exflow"`, `"a", "b" or "c"`.
std::string wirings_with(bool (*accepts)(const WiringTraits&));

}  // namespace muflow::actors
