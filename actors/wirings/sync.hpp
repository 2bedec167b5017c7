#pragma once
/// \file
/// `sync`: DeepSpeed-MoE-style synchronous expert parallelism (the baseline every seed beats).
/// Every device is an attention DP rank; one expert stage per expert on its placement device
/// (per block with an affinity placement); a barrier all-to-all per block for dispatch and for
/// combine; one iteration at a time.

#include "actors/wirings/wiring.hpp"

namespace muflow::actors {

/// The `sync` wiring: one immutable static instance (any thread); the registry hands it out.
const Wiring& sync_wiring();

}  // namespace muflow::actors
