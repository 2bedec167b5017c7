#pragma once
/// \file
/// `async-replicated`: AsyncMoE's barrier-free pipeline (async.hpp) plus HarMoEny's insight
/// that a hot expert should run on more than one device: each block's hot experts get one more
/// expert stage (a replica, holding the same weights) on another expert device, and the
/// attention stage splits such an expert's rows into contiguous chunks, its home stage first
/// (deterministic, so tokens stay bitwise those of sync). A wiring none of the seeds has.
///
/// Which experts: `[placement] replicas = N`, the N hottest experts of each block by the sim
/// router's sample (1024 tokens per attention rank, as the planners use); or
/// `replica_experts = [e, ...]`, exactly these in every block (any backend). Where: the expert
/// device with the least sampled load other than the expert's home (ties: lowest index); each
/// placed replica moves half of its expert's load there (greedy, hottest first).

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/wirings/wiring.hpp"

namespace muflow::actors {

/// The `async-replicated` wiring: one immutable static instance (any thread); the registry hands it
/// out.
const Wiring& async_replicated_wiring();

/// The replicas of one block: (expert, device) pairs, hottest expert first.
using BlockReplicas = std::vector<std::pair<int32_t, int64_t>>;

/// Plans the replicas of every block. `loads[b][e]`: sampled tokens of expert e in block b
/// (all 1 when only `experts` are given); `experts`: the hot experts of every block, or empty
/// to take the `count` hottest per block. Errors: InvalidArgument naming the topology key when
/// there are fewer than two expert devices, `count` exceeds the experts, or an expert id is
/// out of range or repeated.
absl::StatusOr<std::vector<BlockReplicas>> plan_expert_replicas(
    const engine::topology::Topology& topology, const engine::planning::Placement& placement,
    const std::vector<std::vector<double>>& loads, int64_t count,
    const std::vector<int64_t>& experts);

}  // namespace muflow::actors
