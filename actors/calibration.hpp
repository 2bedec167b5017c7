#pragma once
/// \file
/// `muflow calibrate --backend cpu|cuda`: measures this machine's stage kernels for a
/// topology's model on a real backend, and the per-stage host overhead of its actors, and
/// writes them as the CSV the sim reads with `[cost] kernels` (kernels/sim/measured_kernels.hpp),
/// so that the sim predicts this machine's runs on that backend (issue #19 item 3; on cuda,
/// issue #20 item 4: the CSV's `# kind=` is the GPU's sim kind, e.g. H200).

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "engine/topology/topology.hpp"

namespace muflow::actors {

struct CalibrationOptions {
  /// The backend measured: "cpu", or "cuda" (a build with CUDA; the measuring threads'
  /// executors are devices 0, 1, ... of the topology, on GPUs device mod the GPUs seen; the
  /// rows' kind is GPU 0's).
  std::string backend = "cpu";
  int64_t max_tokens = 512;    ///< largest batch (expert rows, prefill tokens, LM-head rows)
  int64_t max_context = 1024;  ///< largest decode context measured
  int repeats = 5;             ///< timed calls per point (median kept), after one warm-up
  /// Threads that run the same measurements at once (each its own device's executor), so the
  /// times carry the contention of a run with that many devices (memory bandwidth, caches).
  /// 0 = the topology's device count.
  int concurrent = 0;
  /// Called with one line per finished group of measurements (progress on stderr).
  std::function<void(const std::string&)> progress;
};

/// Measures `topology`'s model (its [model], dtype and `[cluster] threads_per_device`; run on
/// `options.backend` whatever the topology's `backend` says; "cpu" below reads "cuda" there,
/// and the sim replays use the GPU's sim kind) and writes the CSV to `out`, one row per
/// point as it is measured (flushed, so an interrupted run keeps what it finished):
///  - attention decode (n sequences × context), prefill (one sequence of P tokens), expert
///    FFN (n rows of the whole expert, width ffn: MoEShard's shard runs are not measured
///    separately),
///    LM head + sampling (n rows), each the median of `repeats` calls after one untimed call,
///    on weights as a run finds them: attention calls rotate over blocks; expert calls read
///    the next (block, expert) of one rotation over all of them that runs through every
///    expert point, after an untimed pass over all, so an expert's weights are read again
///    only after every other expert's, as in a decode step, whatever the cache size and the
///    points before (before 2026-11-28 each point read the same `repeats` + 1 experts, so
///    from the second point on they were warm in a large L3 and the rows dipped at 3–8
///    tokens); the LM head reads a 64 MiB buffer between calls; with `concurrent` > 1 each
///    expert size again on one thread while the others idle (`expert_alone`: the devices of
///    one host share its memory bandwidth);
///  - host_attention / host_expert / host_sampler (in-run host time vs tokens): the real
///    model serves a closed batch of 24 requests (8–96 prompt, 16–32 new tokens) on the cpu
///    backend, once to warm up and then eight times with a trace (three before stop 50: the
///    rows of the larger buckets, a few runs each, moved several-fold between calibrations);
///    the sim replays each traced run (its recorded routing, the kernel rows above, no
///    overheads) with a trace; each stage run's measured span minus the sim's span of the
///    same run (same stage, iteration and tokens) is its host time beyond the kernels
///    (μ-queue merge, batch assembly, output scatter, allocation, and what sharing the cores
///    with the other devices costs); the runs' samples are pooled. One row per stage kind and
///    size bucket with >= 16 runs, two per traced run (each size up to 8 tokens its own
///    bucket, then one per power of two; a bucket with fewer is the same run or two of the
///    closed batch, and the sim interpolates its neighbours' rows there): the bucket's
///    median tokens and the trimmed mean excess (the lowest and highest fiftieth dropped; a
///    correction that may be negative where the kernel rows over-estimate runs of that size).
///    Then two refinements: the runs are replayed again charging the rows so far, and each
///    row moves by its bucket's trimmed mean residual, since the
///    rows change which runs overlap and what the queues gather
///    (kernels/sim/host_time_table.hpp); progress reports the traced runs' inter-token
///    latency and each replay's. Runs are matched by (stage, iteration, tokens), then in
///    trace order: for barrier-free wirings (iteration -1) runs of the same size pair in
///    order, not as the same run. The rows describe the topology's wiring (a HarMoEny or
///    MoEShard expert stage runs several experts or shards). From the same runs and
///    replays, host_dispatch / host_combine (barrier host time vs rows moved): each
///    barrier's gap from its last source run's end (so the hop of that run's contribution to
///    the collective counts too) to its first destination's run, measured minus the sim's
///    for the same barrier (kind, block, iteration, rows: the block's expert-stage tokens),
///    by rows in the same buckets with >= 16 barriers; and host_grant (one row): each
///    hand-off between two queued stages on one device (consecutive runs of one barrier's
///    expert stages, the second granted when the first is done), its gap measured minus the
///    sim's for the same device, barrier and pair of stages; in barrier-free wirings (async,
///    no barrier rows) each hand-off between consecutive runs of one device whose second
///    stage had tokens queued when the first ended (its μ-queue depth counter in the trace),
///    less the replay's such hand-offs on average (unpaired: the runs differ); both as the
///    stage rows (trimmed mean, refined), but clamped at 0. Then the runs' spread: per stage
///    kind, the deviation of log(measured span / modeled span) from its size bucket's mean,
///    over the last replay's matched runs (kernels::sim::run_spread_of), written as one
///    metadata line `# spread_attention=σ spread_expert=σ spread_sampler=σ`, and one more
///    replay with it (progress reports its inter-token latency: a mean per run hides what a
///    barrier waiting for the slowest device pays; on the 2-core VM the barrier wirings'
///    replays came from 2.0–4.8 % fast to 0.2–2.6 % fast: bench/README.md, stop 48). Optional: if
///    these runs fail, calibration warns and writes none of the host_* rows nor the spread;
///  - stage_overhead: a tiny model (hidden 16) with the topology's wiring and devices is run
///    on the measured backend (three timed runs, then a warm-up and a traced run on a second
///    server), and the same topology in the sim: with zero kernel times and 1 µs per stage
///    run its inter-token latency counts the stage runs per decode step on the critical path;
///    with the tiny model's own calls (its attention, expert and LM-head executor calls timed
///    as the rows above are: on cuda each is an upload, launches, a download and a stream
///    synchronization, tens of µs, which every row of the real model already holds) and its
///    own barrier and grant times (its traced run against the sim's, measured as above,
///    pooled over sizes) it gives what those cost per step. The host time per stage run is
///    the measured run's inter-token latency less that, over the runs per step (actor
///    messages; it also holds the tiny model's own in-run host time, which host_* rows count
///    again: a few µs per run).
/// Blocks the calling thread (seconds for small models, minutes for large ones). Errors: the
/// topology's (model folder, dims) and the backend's (Unimplemented: cuda in a build without
/// CUDA; FailedPrecondition: no GPU or an unsupported one; ResourceExhausted: out of GPU
/// memory), InvalidArgument for options out of range, a backend other than cpu or cuda, a
/// preset model (no weights) or a vocabulary of 3 tokens or fewer, FailedPrecondition when
/// no scratch folder can be made under TMPDIR, Internal when a run fails. On cuda a GPU
/// allocation that fails inside an expert or sampler call aborts (engine/exec/cuda_executor.hpp).
absl::Status calibrate(const engine::topology::Topology& topology,
                       const CalibrationOptions& options, std::ostream& out);

}  // namespace muflow::actors
