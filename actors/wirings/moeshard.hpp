#pragma once
/// \file
/// `moeshard` (MoEShard §3): sync's attention DP ranks and barriers, but every expert is
/// tensor-sharded over all devices (W_in by columns, W_out by rows;
/// engine/planning/moeshard_plan.hpp): the dispatch all-gathers every row to every device
/// (engine::dataflow::dispatch_all_gather); device d runs shard d of every expert on all of that
/// expert's rows in one GEMM (Executor::expert_shard; engine::exec::CpuExpertShards on cpu); the
/// combine sums the partial outputs in shard order (engine::dataflow::reduce_partials, a
/// reduce-scatter) and hands each rank its rows. The shard sum reorders the down projection's
/// additions, so logits differ from sync by float rounding (tokens equal on the KJV model).

#include "actors/wirings/wiring.hpp"

namespace muflow::actors {

/// The `moeshard` wiring: one immutable static instance (any thread); the registry hands it out.
const Wiring& moeshard_wiring();

}  // namespace muflow::actors
