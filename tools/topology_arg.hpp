#pragma once
/// \file
/// The TOPOLOGY argument of `muflow run` and `muflow serve`.

#include <string>

#include "absl/status/statusor.h"
#include "engine/topology/topology.hpp"

namespace muflow::tools {

/// The topology file at `path` (parse_topology_file), or the embedded default
/// (default_topology(): the shipped kjv model) when `path` is empty. Errors: those two's,
/// with the file, line and key named.
absl::StatusOr<engine::topology::Topology> load_topology_arg(const std::string& path);

}  // namespace muflow::tools
