#pragma once
/// \file
/// Setting one topology parameter from a "key=value" string: what `muflow bench --sweep`
/// varies between runs.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/topology/topology.hpp"

namespace muflow::engine::topology {

/// Keys accepted by apply_topology_override, e.g. "router.skew", "workload.rate".
std::vector<std::string> topology_override_keys();

/// Sets `key` (dotted, as in the topology file) to `value` in `topology`. cluster.num_devices
/// keeps the kind of device 0 and its node, or with the shorthand's `devices_per_node`
/// groups the devices into nodes of that many. Values are bounded as the parser bounds the same
/// key (e.g. workload.input/output at most 2^24 tokens, scheduler.max_prefill_tokens and
/// max_batch_tokens at most 2^20), and the cost.* keys apply to a sim topology only. Errors:
/// InvalidArgument for an unknown key (listing the known ones), a value that is not of the
/// key's type / range, or a cost.* key on a cpu or cuda topology.
absl::Status apply_topology_override(Topology& topology, const std::string& key,
                                     const std::string& value);

}  // namespace muflow::engine::topology
