#pragma once
/// \file
/// Topology files: one TOML file declaring cluster, model, wiring, placement, backend,
/// workload and sampling (ARCHITECTURE.md §6). Parsed with toml++.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.hpp"
#include "engine/routing/router_model.hpp"
#include "engine/topology/wiring_names.hpp"

namespace muflow::engine::topology {

/// One device of the cluster. On the cpu backend every device is a virtual CPU device (an
/// executor in this process).
struct DeviceSpec {
  std::string name;          ///< unique, e.g. "cpu0"
  std::string kind = "cpu";  ///< "cpu" (later: "H100-SXM", "A100-80GB", ...)
  std::string node = "node0";
};

/// Model source: an HF folder, or synthetic dims with a seed (random weights in memory).
struct ModelSpec {
  std::string path;  ///< HF folder (absolute after parsing); empty = synthetic
  std::optional<model::ModelConfig> synthetic;  ///< set when the [model] table gives dims
  uint64_t seed = 0;                            ///< weight seed for synthetic models
  std::string dtype = "f32";                    ///< "f32" | "bf16" for synthetic weights
  /// cpu backend, bf16 weights: "auto" (bf16 GEMMs where the CPU has AVX512-BF16 or AMX, else
  /// weights up-converted to f32 at load) | "bf16" | "f32" (kernels/cpu/bf16_compute.hpp).
  std::string compute = "auto";
  /// The CPU GEMM of every Linear (kernels/cpu/linear.hpp): "auto" (the fixed-order kernel
  /// where the CPU has AVX-512, else oneDNN tiles) | "fixed-order" | "onednn-tiles" (for
  /// comparisons; the moeshard wiring's expert shards always take "auto").
  std::string gemm = "auto";
  std::string preset;  ///< weightless model preset (sim only), e.g. "mixtral-8x7b"
};

/// Where the requests come from.
struct WorkloadSpec {
  std::string kind = "prompts";      ///< "prompts" | "ids" | "poisson" | "trace"
  std::string prompts_file;          ///< kind=prompts: one prompt per line (absolute path)
  std::vector<std::string> prompts;  ///< kind=prompts given inline
  std::vector<std::vector<int32_t>> prompt_ids;  ///< kind=ids
  /// kind=prompts/ids: tokens generated per request (>= 1). kind=poisson/trace: upper clamp
  /// on the generated lengths, 0 = no clamp (the parser's default for those kinds).
  int64_t max_new_tokens = 16;
  // kind = poisson
  int64_t num_requests = 8;
  double rate_per_s = 4.0;                  ///< mean arrivals per second
  int64_t input_min = 8, input_max = 32;    ///< uniform prompt length range (tokens)
  int64_t output_min = 8, output_max = 32;  ///< uniform output length range (tokens)
  // kind = trace
  std::string trace_file;         ///< CSV TIMESTAMP,ContextTokens,GeneratedTokens (absolute)
  double time_scale = 1.0;        ///< arrival times are multiplied by this (>= 0)
  int64_t max_requests = 0;       ///< 0 = all rows
  int64_t max_prompt_tokens = 0;  ///< 0 = no clamp; else prompt lengths clamped to this
  uint64_t seed = 0;              ///< for synthetic prompt ids and arrivals
};

/// Sampling: temperature 0 = greedy (argmax, ties → lowest id).
struct SamplingSpec {
  double temperature = 0.0;
  double top_p = 1.0;
  uint64_t seed = 0;
  bool stop_at_eos = true;
  /// Draws keyed by (seed, request id, position) — every request of a workload draws
  /// differently; false: by (seed, position) only, so one request's explicit seed reproduces
  /// its output whatever id the engine gave it (an HTTP request's `seed`).
  bool key_by_request = true;
};

/// Engine-side limits of continuous batching and the device scheduler.
struct SchedulerSpec {
  /// Device scheduling: "fifo" | "most-tokens" | "flfs" | "defrag"; empty (the key absent) =
  /// the wiring's default (actors/wirings/device_policy.hpp: "defrag" on async and
  /// async-replicated, "fifo" on the others).
  std::string policy;
  int64_t max_batch_requests = 64;   ///< per attention DP rank
  /// prompt tokens per rank per iteration (chunked prefill), at most kMaxBatchTokens
  int64_t max_prefill_tokens = 512;
  /// Barrier-free wirings (`async`): most tokens one stage run takes from its μ-queue (the
  /// batch is re-formed just in time from what is queued; AsyncMoE's public code uses 512).
  /// Barrier wirings run whatever the barrier delivered. At most kMaxBatchTokens.
  int64_t max_batch_tokens = 512;
  /// Barrier-free wirings: a stage with fewer queued tokens than this waits up to
  /// hold_max_ms for more before its device may run it (0 = never hold).
  int64_t hold_min_tokens = 0;
  /// Barrier-free wirings: what a merge point releases together: "request" (a request's
  /// tokens once all their top-k outputs arrived; AsyncMoE §3.2) or "wave" (every token of
  /// one attention run, so a rank's wave is not split by expert devices finishing apart).
  std::string merge = "request";
  double hold_max_ms = 1.0;
  /// Admission limit: most requests that arrived and wait to be admitted (batch or KV-cache
  /// limits full); a request arriving beyond it is rejected at once (finish reason
  /// "rejected: queue full") instead of queueing without bound. 0 = unlimited.
  int64_t max_queued_requests = 0;
  /// `policy = "defrag"` (engine/serving/scheduling_policy.hpp DefragPolicy): K, the blocks
  /// after a stage's own whose queued tokens add to its score, and δ, their weight decay.
  /// AsyncMoE's paper gives no values; its public code (USC-NSL/DisagMoE) scores the layer
  /// itself and 3 more (main, 83f2888) or 7 more (refine_plots and the other April 2025
  /// branches, 94fd782) with δ = 0.8.
  int64_t defrag_lookahead = 3;
  double defrag_decay = 0.8;
};

/// `harmoeny` wiring options (HarMoEny §4; ../shared/seeds/NOTES.md for its public code).
struct HarmoenySpec {
  /// Token transfer threshold q (tokens, ≥ 1); 0 = Eq. 4 from the first device's FLOP/s
  /// (model precision) and host-link bandwidth (sim), or HarMoEny's code default 150 (cpu,
  /// which has no modeled rates).
  int64_t q = 0;
  /// "paper" (Algorithm 2) or "code" (the variant HarMoEny's public code runs).
  std::string rebalance = "paper";
  /// Expert slots per device (≥ the most experts any device hosts); 0 = that maximum
  /// (E / devices, HarMoEny's default).
  int64_t slots = 0;
  /// Copy foreign experts into free slots while other experts compute (true) or only when
  /// the device reaches them (false: the ablation "rebalance without prefetch").
  bool prefetch = true;
};

/// The sim backend's network (transport/link_model.hpp link class names). Empty = the
/// default for the devices' kind (NVLink of that generation inside a node, 200 Gb/s between
/// nodes, the kind's PCIe generation to the host).
struct NetworkSpec {
  std::string intra_node;        ///< e.g. "nvlink4-h100"
  std::string inter_node;        ///< e.g. "ib-200g"
  std::string host_link;         ///< e.g. "pcie4-x16"
  int64_t activation_bytes = 2;  ///< bytes per activation element on the wire (bf16 = 2)
  /// Order in which a synchronous all-to-all's point-to-point transfers are served (one of
  /// kKnownA2aOrders; transport/aurora_order.hpp): "row_major" (each source sends to
  /// destinations 0, 1, ...), "random", "sjf" (smallest first), "aurora_chunked"
  /// (contention-free chunked order that finishes in Aurora's b_max, Theorem 4.2/5.2, plus
  /// one latency per chunk), "aurora_unsplit" (Aurora Algorithm 1, one transfer per pair) or
  /// "aurora" (whichever of the two the network model predicts faster).
  std::string a2a_order = "row_major";
  /// How concurrent transfers share a device's ports (one of kKnownNetworkModels;
  /// transport/big_switch_network.hpp NetworkModel): "serial" (one transfer per port at a
  /// time, in `a2a_order`) or "fair-share" (max-min fair sharing between concurrent flows).
  std::string model = "serial";
  /// "file:line" of each link key given, so a later check (transport/, which engine/ cannot
  /// include) can still point at the line: keys "intra_node", "inter_node", "host_link".
  std::map<std::string, std::string> where;
};

/// Host-side step overheads of one device kind (sim), in microseconds of virtual time.
struct StepOverheads {
  /// Host work of one stage run around its kernels (batch assembly, pre/post-processing,
  /// launch preparation), added to every stage run's modeled duration. >= 0.
  double stage_us = 0;
  /// One decision of the device's scheduler (picking the next stage to run), added to every
  /// stage run: each starts with one, a grant of the device actor or a direct start on an
  /// idle device (actors/device_gate.hpp). >= 0.
  double scheduler_us = 0;
  /// Further host work of each attention stage run (and sampler run) / expert stage run, on
  /// top of `stage_us`: where a system's steps differ by stage type, e.g. AsyncMoE §5.4's
  /// attention step (2.7 ms, mostly page-table traversal and GPU→CPU post-processing) vs its
  /// expert step (0.8 ms). >= 0.
  double attention_us = 0;
  double expert_us = 0;
};

/// Measured expert-FFN times to calibrate the sim's cost model with
/// (kernels::sim::CostModel::calibrate_expert_ffn): the file and what was measured.
struct ExpertFfnCalibration {
  std::string file;                ///< CSV `,num_toks,time` (ms); resolved against the topology
  std::string kind = "V100-32GB";  ///< device kind the times were measured on
  int64_t hidden = 768;            ///< the measured expert's dims
  int64_t ffn = 3072;
  std::string ffn_kind = "two-layer";  ///< "two-layer" (Switch) or "swiglu"
  std::string dtype = "f32";           ///< "f32" or "bf16"
  std::string where;                   ///< "file:line" of `file`, for later errors
};

/// `[cost]` (sim): step overheads and kernel calibration. Defaults add nothing.
struct CostSpec {
  StepOverheads overheads;                     ///< every device kind
  std::map<std::string, StepOverheads> kinds;  ///< per device kind name, replaces `overheads`
  std::optional<ExpertFfnCalibration> expert_ffn;
  /// Stage kernel times measured on real hardware (`muflow calibrate`; CSV of
  /// kernels/sim/measured_kernels.hpp), used instead of the roofline for the device kind
  /// that ran them; empty = none. `kernels_where`: "file:line" of the key.
  std::string kernels;
  std::string kernels_where;
  /// `spread_seed`: the seed of the draws that spread each stage run's duration around its
  /// mean where `kernels` has `# spread_*` metadata (engine/exec/run_spread.hpp); another seed
  /// is another sample of the same run's noise. 0: no spread (every run its mean).
  uint64_t spread_seed = 1;
  /// The overheads of device kind `kind`.
  const StepOverheads& of(const std::string& kind) const {
    auto it = kinds.find(kind);
    return it != kinds.end() ? it->second : overheads;
  }
};

/// One `[[cluster.workers]]` entry (#18): a `muflow worker` process that hosts some of the
/// cluster's devices (their device actors and every stage placed on them).
struct WorkerSpec {
  std::string address;           ///< "HOST:PORT" its `muflow worker --listen` is reachable at
  std::vector<int64_t> devices;  ///< device indices it hosts: ascending, no two workers share one
};

/// A whole topology file (format and annotated example: topologies/README.md). Plain value;
/// produced by the parser, then read-only (safe to share between threads).
struct Topology {
  std::string source;           ///< file path (or "<embedded default>")
  std::string wiring = "sync";  ///< one of kKnownWirings
  std::string backend = "cpu";  ///< "cpu" (later: "sim", "cuda")
  std::vector<DeviceSpec> devices;
  /// `[cluster] threads_per_device` (cpu backend): threads each device's GEMMs use
  /// (kernels/cpu/gemm_threads.hpp; results are bitwise the same for any count). 0 = auto:
  /// the machine's hardware threads divided by the number of devices, at least 1 (see
  /// resolve_threads_per_device). At most kMaxThreadsPerDevice.
  int64_t threads_per_device = 0;
  /// `[cluster] devices_per_node` of the shorthand (0: every device on node0); kept so that a
  /// `cluster.num_devices` override lays out its devices the same way.
  int64_t devices_per_node = 0;
  ModelSpec model;
  /// "round-robin" | "contiguous" | "explicit" | "affinity" | "capability" (Aurora Thm 5.1)
  std::string placement = "round-robin";
  /// explicit placement: expert_device[e] = device index hosting expert e (all blocks)
  std::vector<int64_t> expert_device;
  /// affinity placement (ExFlow §IV, engine/planning/affinity_placement.hpp): a different expert →
  /// device map per block, planned at startup from the per-token paths in `affinity_paths`
  /// (a `muflow run --record-routing` CSV, absolute after parsing) with `affinity_planner`
  /// ("heuristic" or "milp") under `affinity_time_limit_s` seconds (> 0).
  std::string affinity_paths;
  std::string affinity_planner = "heuristic";
  double affinity_time_limit_s = 10.0;
  /// `async` wiring: devices 0..attention_devices-1 run attention (one DP rank each, every
  /// block) and the sampler, the others the experts; 0 = half the devices (AsyncMoE's 4 + 4
  /// on 8 GPUs). Other wirings ignore it.
  int64_t attention_devices = 0;
  /// Wirings with replicated experts (`async-replicated`): the `expert_replicas` hottest
  /// experts of each block (by the sim router's sample) get one more expert stage on another
  /// expert device, or (`replica_experts`, any backend) exactly these experts do. At most
  /// kMaxExpertReplicas; 0 / empty = none.
  int64_t expert_replicas = 0;
  std::vector<int64_t> replica_experts;
  WorkloadSpec workload;
  SamplingSpec sampling;
  SchedulerSpec scheduler;
  HarmoenySpec harmoeny;       ///< `harmoeny` wiring only
  routing::RouterSpec router;  ///< sim: how tokens pick experts (cpu uses the real gate)
  NetworkSpec network;         ///< sim: links between devices
  CostSpec cost;               ///< sim: step overheads, kernel calibration
  std::string trace_file;      ///< Chrome trace output; empty = none
  /// Per-token expert choices output (engine/routing/routing_record.hpp CSV); empty = none. Set by
  /// `muflow run --record-routing FILE`.
  std::string routing_record_file;
  /// `[[cluster.workers]]` (#18, cpu backend): the worker processes and their devices; the
  /// devices no worker lists stay in this (the driver's) process. Empty: one process.
  std::vector<WorkerSpec> workers;
  /// `[cluster] token_file` (absolute after parsing): the cluster secret's file; empty = the
  /// `MUFLOW_CLUSTER_TOKEN` environment variable (transport/cluster/cluster_secret.hpp).
  std::string cluster_token_file;
  /// The TOML text this topology was parsed from and the folder its relative paths resolve
  /// against (parse_topology_string's arguments): a driver hands both to its workers, which
  /// parse the same file. Empty for topologies built in code.
  std::string source_text;
  std::string base_dir;
};

/// Most `[[cluster.workers]]` a topology may list.
inline constexpr int64_t kMaxWorkers = 1024;

/// Most devices a cluster may declare (the project's target is 8 to 1,024 simulated GPUs).
inline constexpr int64_t kMaxDevices = 4096;

/// Most threads `[cluster] threads_per_device` may ask for.
inline constexpr int64_t kMaxThreadsPerDevice = 256;

/// `topology.threads_per_device`, with 0 (auto) resolved for `hardware_threads` (e.g.
/// std::thread::hardware_concurrency(); 0 = unknown, taken as 1): max(1, hardware_threads /
/// number of devices). Any thread.
int64_t resolve_threads_per_device(const Topology& topology, int64_t hardware_threads);
/// Most requests a workload may generate up front (Poisson `num_requests`, trace
/// `max_requests`); longer services submit to a running engine instead.
inline constexpr int64_t kMaxWorkloadRequests = 10'000'000;
/// Bound on `[scheduler] max_prefill_tokens` and `max_batch_tokens`: the rows of one stage
/// run, so of one GEMM (the cuda kernels launch at most 65,535 row tiles of 64 or 128 rows;
/// a bound here keeps that a clear error at load).
inline constexpr int64_t kMaxBatchTokens = int64_t{1} << 20;
/// Bound on `[placement] replicas` and the length of `replica_experts` (stages per block).
inline constexpr int64_t kMaxExpertReplicas = 4096;
/// HarMoEny rebalancing variants accepted as `[harmoeny] rebalance = "..."`.
/// All-to-all transmission orders accepted as `[network] a2a_order = "..."`.
inline constexpr std::array<std::string_view, 6> kKnownA2aOrders = {
    "row_major", "random", "sjf", "aurora", "aurora_chunked", "aurora_unsplit"};
inline constexpr std::array<std::string_view, 2> kKnownRebalances = {"paper", "code"};
/// Network models accepted as `[network] model = "..."`.
inline constexpr std::array<std::string_view, 2> kKnownNetworkModels = {"serial", "fair-share"};
/// Backends a topology may name (`backend = "..."`); `cuda` needs a build with the CUDA
/// toolkit and a GPU where it runs (actors/backends/backend.hpp says when it is missing).
inline constexpr std::array<std::string_view, 3> kKnownBackends = {"cpu", "cuda", "sim"};
/// Expert placement names accepted as `[placement] experts = "..."`.
inline constexpr std::array<std::string_view, 4> kKnownPlacements = {"round-robin", "contiguous",
                                                                     "affinity", "capability"};
/// Merge granularities accepted as `[scheduler] merge = "..."`.
inline constexpr std::array<std::string_view, 2> kKnownMerges = {"request", "wave"};
/// Workload kinds accepted as `[workload] kind = "..."`.
inline constexpr std::array<std::string_view, 4> kKnownWorkloadKinds = {"prompts", "ids", "poisson",
                                                                        "trace"};

/// Parses a topology file (format: topologies/README.md). Relative paths inside are
/// resolved against the file's folder and stored absolute.
/// Errors: InvalidArgument "FILE:LINE: key 'a.b': expected ..., got ..." for a wrong type,
/// unknown key, unknown wiring/backend/kind, out-of-range value; NotFound for a missing file;
/// the toml++ parse error with its line and column for malformed TOML. Input files named in
/// the topology (model folder, prompts file, trace CSV) must exist (NotFound otherwise);
/// keys left out take synthetic_demo_topology()'s values. No shared state; any thread.
absl::StatusOr<Topology> parse_topology_file(const std::string& path);

/// Same from an in-memory string; `source_name` is used in error messages and relative
/// paths resolve against `base_dir`.
absl::StatusOr<Topology> parse_topology_string(const std::string& text,
                                               const std::string& source_name,
                                               const std::string& base_dir);

/// Checks what the parser cannot know for a model given by `path` until its config.json is
/// loaded: an explicit placement has exactly one entry per expert, and kind = "ids" token
/// ids are < vocab_size. InvalidArgument naming the topology source otherwise.
/// Pure function; any thread.
absl::Status check_topology_against_model(const Topology& topology,
                                          const model::ModelConfig& config);

/// The embedded default (`muflow run` / `muflow serve` with no topology): the trained BF16
/// KJV model shipped in the repository's `models/kjv-mixtral-tiny-bf16/` (found by
/// engine/model/embedded_model.hpp's `embedded_model_dir()`), cpu backend, 2 cpu devices
/// (a 2-core laptop), sync wiring, round-robin placement, kDefaultPrompts as text prompts,
/// kDefaultMaxNewTokens new tokens each, greedy sampling that stops at EOS, no trace file.
/// Errors: NotFound when the model folder is not found (the message lists the places looked
/// in, names MUFLOW_MODELS_DIR and `muflow run --synthetic`). Reads the environment; any
/// thread.
absl::StatusOr<Topology> default_topology();

/// Built-in text prompts of default_topology() (KJV verse beginnings).
inline constexpr std::array<std::string_view, 4> kDefaultPrompts = {
    "And God said, Let there be", "In the beginning God created", "The LORD is my shepherd;",
    "And the earth was without form, and"};
/// Tokens generated per request by default_topology().
inline constexpr int64_t kDefaultMaxNewTokens = 32;

/// The synthetic demo (`muflow run --synthetic`; benchmarks and tests that need no model
/// files), and the base every topology file starts from (keys left out take its values): a
/// synthetic Mixtral-style model (default_synthetic_config(), seed 0, f32 weights), 4 cpu
/// devices, sync wiring, six built-in token-id prompts of 3 to 20 tokens, 16 new tokens,
/// greedy sampling. Pure function; any thread.
Topology synthetic_demo_topology();

/// The synthetic model of synthetic_demo_topology(): mixtral, vocab 512, hidden 128, 4
/// layers, 4 heads / 2 kv heads (head_dim 32), 8 experts top-2, expert ffn 256.
model::ModelConfig default_synthetic_config();

}  // namespace muflow::engine::topology
