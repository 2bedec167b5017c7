// Topology file parser: root keys, [cluster], [model], [placement], [scheduler], [sampling].
// [workload] lives in topology_workload.cpp, the embedded default in topology_defaults.cpp.
// Format reference: topologies/README.md.

#include "engine/topology/topology.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "engine/model/model_limits.hpp"
#include "engine/model/model_presets.hpp"
#include "engine/serving/scheduling_policy.hpp"
#include "engine/sv_cat.hpp"
#include "engine/topology/toml_reader.hpp"
#include "engine/topology/topology_sections.hpp"

namespace muflow::engine::topology {
namespace {

namespace fs = std::filesystem;
using topology_detail::require_existing;
using topology_detail::resolve_path;

constexpr std::string_view kRootKeys[] = {
    "wiring",   "backend",  "trace",  "cluster", "model",    "placement", "scheduler",
    "workload", "sampling", "router", "network", "harmoeny", "cost"};
constexpr std::string_view kHarmoenyKeys[] = {"q", "rebalance", "slots", "prefetch"};
constexpr std::string_view kClusterKeys[] = {
    "num_devices",        "kind",    "devices_per_node", "devices",
    "threads_per_device", "workers", "token_file"};
constexpr std::string_view kDeviceKeys[] = {"name", "kind", "node"};
constexpr std::string_view kModelKeys[] = {
    "path", "type", "vocab",      "hidden", "layers", "heads",  "kv_heads", "head_dim", "experts",
    "topk", "ffn",  "shared_ffn", "seed",   "dtype",  "preset", "compute",  "gemm"};
constexpr std::string_view kModelTypes[] = {"mixtral", "qwen2_moe"};
constexpr std::string_view kDtypes[] = {"f32", "bf16"};
constexpr std::string_view kComputes[] = {"auto", "bf16", "f32"};
constexpr std::string_view kGemms[] = {"auto", "fixed-order", "onednn-tiles"};
constexpr std::string_view kPlacementKeys[] = {"experts",        "attention_devices", "paths",
                                               "planner",        "time_limit_s",      "replicas",
                                               "replica_experts"};
constexpr std::string_view kAffinityPlanners[] = {"heuristic", "milp"};
constexpr std::string_view kSchedulerKeys[] = {"policy",
                                               "max_batch_requests",
                                               "max_prefill_tokens",
                                               "max_batch_tokens",
                                               "hold_min_tokens",
                                               "hold_max_ms",
                                               "merge",
                                               "max_queued_requests",
                                               "defrag_lookahead",
                                               "defrag_decay"};
constexpr std::string_view kSamplingKeys[] = {"temperature", "top_p", "seed", "stop_at_eos"};

absl::Status parse_cluster(const TomlTableReader& r, const std::string& backend,
                           std::vector<DeviceSpec>* devices, int64_t* threads_per_device,
                           int64_t* devices_per_node) {
  MUFLOW_TOPO_RETURN_IF_ERROR(r.check_keys(kClusterKeys));
  MUFLOW_TOPO_RETURN_IF_ERROR(
      r.read_int("threads_per_device", threads_per_device, 0, kMaxThreadsPerDevice));
  const bool has_shorthand = r.has("num_devices") || r.has("kind") || r.has("devices_per_node");
  if (r.has("devices") && has_shorthand) {
    return r.error("devices",
                   "give either num_devices/kind/devices_per_node or "
                   "[[cluster.devices]], not both");
  }
  if (!r.has("devices")) {
    int64_t num_devices = static_cast<int64_t>(devices->size());
    std::string kind = backend == "cuda" ? "cuda" : "cpu";
    MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("num_devices", &num_devices, 1, kMaxDevices));
    // 0: every device on node0 (one node).
    MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("devices_per_node", devices_per_node, 0, kMaxDevices));
    const int64_t per_node = *devices_per_node;
    MUFLOW_TOPO_RETURN_IF_ERROR(r.read_string("kind", &kind));
    MUFLOW_TOPO_RETURN_IF_ERROR(topology_detail::check_device_kind(r, "kind", backend, kind));
    devices->clear();
    for (int64_t i = 0; i < num_devices; ++i) {
      devices->push_back(
          DeviceSpec{sv_cat(kind, i), kind, sv_cat("node", per_node > 0 ? i / per_node : 0)});
    }
    return absl::OkStatus();
  }
  const toml::array* arr = r.node("devices")->as_array();
  if (arr == nullptr || arr->empty() || !arr->is_array_of_tables()) {
    return r.error("devices", sv_cat("expected a non-empty array of tables "
                                     "([[cluster.devices]]), got ",
                                     toml_type_name(*r.node("devices"))));
  }
  if (static_cast<int64_t>(arr->size()) > kMaxDevices) {
    return r.error("devices",
                   sv_cat("expected at most ", kMaxDevices, " devices, got ", arr->size()));
  }
  devices->clear();
  std::set<std::string> names;
  for (size_t i = 0; i < arr->size(); ++i) {
    const TomlTableReader d(*(*arr)[i].as_table(), r.source(),
                            sv_cat(r.prefix(), ".devices[", i, "]"));
    MUFLOW_TOPO_RETURN_IF_ERROR(d.check_keys(kDeviceKeys));
    DeviceSpec spec;
    MUFLOW_TOPO_RETURN_IF_ERROR(d.read_string("kind", &spec.kind));
    spec.name = sv_cat(spec.kind, i);
    MUFLOW_TOPO_RETURN_IF_ERROR(d.read_string("name", &spec.name));
    MUFLOW_TOPO_RETURN_IF_ERROR(d.read_string("node", &spec.node));
    MUFLOW_TOPO_RETURN_IF_ERROR(topology_detail::check_device_kind(d, "kind", backend, spec.kind));
    if (!names.insert(spec.name).second) {
      return d.error("name", sv_cat("duplicate device name '", spec.name, "'"));
    }
    devices->push_back(std::move(spec));
  }
  return absl::OkStatus();
}

absl::Status parse_model(const TomlTableReader& r, const fs::path& base_dir, ModelSpec* model) {
  MUFLOW_TOPO_RETURN_IF_ERROR(r.check_keys(kModelKeys));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_choice("compute", &model->compute, kComputes));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_choice("gemm", &model->gemm, kGemms));
  if (r.has("preset")) {
    for (std::string_view key : kModelKeys) {
      if (key != "preset" && key != "dtype" && key != "compute" && key != "gemm" && r.has(key)) {
        return r.error(key,
                       "a [model] table gives either preset = \"...\" (with an optional "
                       "dtype), path = \"...\" or synthetic dims, not several");
      }
    }
    std::string name;
    MUFLOW_TOPO_RETURN_IF_ERROR(r.read_string("preset", &name));
    absl::StatusOr<model::ModelConfig> preset = model::model_preset(name);
    if (!preset.ok()) return r.error("preset", std::string(preset.status().message()));
    MUFLOW_TOPO_RETURN_IF_ERROR(r.read_choice("dtype", &model->dtype, kDtypes));
    model->path.clear();
    model->preset = name;
    model->synthetic = *preset;
    return absl::OkStatus();
  }
  if (r.has("path")) {
    for (std::string_view key : kModelKeys) {
      if (key != "path" && key != "compute" && key != "gemm" && r.has(key)) {
        return r.error(key,
                       "applies to synthetic models only; a [model] table gives either "
                       "path = \"...\" or synthetic dims, not both");
      }
    }
    std::string path;
    MUFLOW_TOPO_RETURN_IF_ERROR(r.read_string("path", &path));
    model->path = resolve_path(base_dir, path);
    model->synthetic.reset();
    return require_existing(r, "path", model->path, /*want_folder=*/true);
  }
  model::ModelConfig c = default_synthetic_config();
  std::string type = model::model_type_name(c.model_type);
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_choice("type", &type, kModelTypes));
  c.model_type = type == "qwen2_moe" ? model::ModelType::kQwen2Moe : model::ModelType::kMixtral;
  if (c.model_type == model::ModelType::kQwen2Moe) {
    c.attention_bias = true;
    c.norm_topk_prob = false;
  }
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("vocab", &c.vocab_size, 4, model::kMaxVocab));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("hidden", &c.hidden_size, 1, model::kMaxHidden));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("layers", &c.num_layers, 1, model::kMaxLayers));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("heads", &c.num_heads, 1, model::kMaxHeads));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("kv_heads", &c.num_kv_heads, 1, model::kMaxHeads));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("experts", &c.num_experts, 1, model::kMaxExperts));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("topk", &c.num_topk, 1, model::kMaxExperts));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("ffn", &c.expert_ffn, 1, model::kMaxFfn));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("shared_ffn", &c.shared_expert_ffn, 0, model::kMaxFfn));
  if (r.has("head_dim")) {
    MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("head_dim", &c.head_dim, 1, model::kMaxHeadDim));
  } else if (r.has("hidden") || r.has("heads")) {
    if (c.hidden_size % c.num_heads != 0) {
      return r.error(r.has("heads") ? "heads" : "hidden",
                     sv_cat("hidden ", c.hidden_size, " is not divisible by heads ", c.num_heads,
                            "; give head_dim explicitly"));
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.model_type == model::ModelType::kMixtral && c.shared_expert_ffn > 0) {
    return r.error("shared_ffn",
                   "mixtral has no shared expert; expected 0 or "
                   "type = \"qwen2_moe\"");
  }
  if (c.num_kv_heads > c.num_heads || c.num_heads % c.num_kv_heads != 0) {
    return r.error("kv_heads",
                   sv_cat("expected a divisor of heads ", c.num_heads, ", got ", c.num_kv_heads));
  }
  if (c.num_topk > c.num_experts) {
    return r.error("topk",
                   sv_cat("expected at most experts = ", c.num_experts, ", got ", c.num_topk));
  }
  if (absl::Status s = c.validate(); !s.ok()) {
    return r.table_error(sv_cat("[model]: ", s.message()));
  }
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_seed("seed", &model->seed));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_choice("dtype", &model->dtype, kDtypes));
  model->path.clear();
  model->synthetic = c;
  return absl::OkStatus();
}

absl::Status parse_placement(const TomlTableReader& r, const fs::path& base_dir,
                             int64_t num_devices,
                             const std::optional<model::ModelConfig>& synthetic, Topology* topo) {
  MUFLOW_TOPO_RETURN_IF_ERROR(r.check_keys(kPlacementKeys));
  if (r.has("attention_devices")) {
    MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("attention_devices", &topo->attention_devices, 1));
    if (topo->attention_devices >= num_devices) {
      return r.error("attention_devices",
                     sv_cat("expected fewer attention devices than the cluster's ", num_devices,
                            " devices (the rest host the experts), got ", topo->attention_devices));
    }
  }
  if (r.has("replicas")) {
    MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("replicas", &topo->expert_replicas, 0));
    if (topo->expert_replicas > kMaxExpertReplicas) {
      return r.error("replicas", sv_cat("expected at most ", kMaxExpertReplicas,
                                        " replicated experts, got ", topo->expert_replicas));
    }
  }
  if (r.has("replica_experts")) {
    if (r.has("replicas")) {
      return r.error("replica_experts", "give either replicas = N or replica_experts, not both");
    }
    const toml::array* arr = r.node("replica_experts")->as_array();
    if (arr == nullptr || arr->empty() || static_cast<int64_t>(arr->size()) > kMaxExpertReplicas) {
      return r.error("replica_experts",
                     sv_cat("expected an array of 1 to ", kMaxExpertReplicas, " expert ids"));
    }
    topo->replica_experts.clear();
    for (size_t i = 0; i < arr->size(); ++i) {
      const auto* v = (*arr)[i].as_integer();
      if (v == nullptr || v->get() < 0) {
        return r.error("replica_experts",
                       sv_cat("expected expert ids >= 0, got ",
                              v ? sv_cat(v->get()) : toml_type_name((*arr)[i]), " at index ", i));
      }
      topo->replica_experts.push_back(v->get());
    }
  }
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_choice("planner", &topo->affinity_planner, kAffinityPlanners));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_double("time_limit_s", &topo->affinity_time_limit_s,
                                            "seconds > 0",
                                            [](double v) { return std::isfinite(v) && v > 0; }));
  if (r.has("paths")) {
    MUFLOW_TOPO_RETURN_IF_ERROR(r.read_string("paths", &topo->affinity_paths));
    topo->affinity_paths = resolve_path(base_dir, topo->affinity_paths);
    MUFLOW_TOPO_RETURN_IF_ERROR(require_existing(r, "paths", topo->affinity_paths, false));
  }
  const toml::node* n = r.node("experts");
  if (n != nullptr && n->is_string()) {
    MUFLOW_TOPO_RETURN_IF_ERROR(r.read_choice("experts", &topo->placement, kKnownPlacements));
    topo->expert_device.clear();
  }
  const bool affinity = topo->placement == "affinity";
  if (affinity && topo->affinity_paths.empty()) {
    return r.error("experts",
                   "experts = \"affinity\" needs paths = \"...\" (a CSV from "
                   "`muflow run --record-routing`)");
  }
  if (!affinity && (r.has("paths") || r.has("planner") || r.has("time_limit_s"))) {
    return r.error(r.has("paths")     ? "paths"
                   : r.has("planner") ? "planner"
                                      : "time_limit_s",
                   "applies to experts = \"affinity\" only");
  }
  if (n == nullptr || n->is_string()) return absl::OkStatus();
  const std::string expected =
      sv_cat("\"round-robin\" or an array of device indices in [0, ", num_devices, ")");
  const toml::array* arr = n->as_array();
  if (arr == nullptr || arr->empty()) {
    return r.error("experts", sv_cat("expected ", expected, ", got ",
                                     arr ? "an empty array" : toml_type_name(*n)));
  }
  std::vector<int64_t> expert_device;
  for (size_t e = 0; e < arr->size(); ++e) {
    const auto* v = (*arr)[e].as_integer();
    if (v == nullptr || v->get() < 0 || v->get() >= num_devices) {
      const std::string got = v ? sv_cat(v->get()) : toml_type_name((*arr)[e]);
      return r.error("experts", sv_cat("expected ", expected, ", got ", got, " for expert ", e));
    }
    expert_device.push_back(v->get());
  }
  if (synthetic.has_value() &&
      static_cast<int64_t>(expert_device.size()) != synthetic->num_experts) {
    return r.error("experts",
                   sv_cat("expected one device index per expert (", synthetic->num_experts,
                          " entries), got ", expert_device.size()));
  }
  topo->placement = "explicit";
  topo->expert_device = std::move(expert_device);
  return absl::OkStatus();
}

absl::Status parse_scheduler(const TomlTableReader& r, SchedulerSpec* s) {
  MUFLOW_TOPO_RETURN_IF_ERROR(r.check_keys(kSchedulerKeys));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_choice("policy", &s->policy, serving::kSchedulingPolicyNames));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("max_batch_requests", &s->max_batch_requests, 1));
  MUFLOW_TOPO_RETURN_IF_ERROR(
      r.read_int("max_prefill_tokens", &s->max_prefill_tokens, 1, kMaxBatchTokens));
  MUFLOW_TOPO_RETURN_IF_ERROR(
      r.read_int("max_batch_tokens", &s->max_batch_tokens, 1, kMaxBatchTokens));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("hold_min_tokens", &s->hold_min_tokens, 0));
  MUFLOW_TOPO_RETURN_IF_ERROR(
      r.read_int("max_queued_requests", &s->max_queued_requests, 0, kMaxWorkloadRequests));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_choice("merge", &s->merge, kKnownMerges));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_double("hold_max_ms", &s->hold_max_ms,
                                            "a number of milliseconds in [0, 10000]",
                                            [](double v) { return v >= 0 && v <= 1e4; }));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("defrag_lookahead", &s->defrag_lookahead, 0, 1024));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_double("defrag_decay", &s->defrag_decay, "a number in [0, 1]",
                                            [](double v) { return v >= 0 && v <= 1; }));
  return absl::OkStatus();
}

absl::Status parse_sampling(const TomlTableReader& r, SamplingSpec* s) {
  MUFLOW_TOPO_RETURN_IF_ERROR(r.check_keys(kSamplingKeys));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_double("temperature", &s->temperature, "a number >= 0",
                                            [](double v) { return std::isfinite(v) && v >= 0; }));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_double("top_p", &s->top_p, "a number in (0, 1]",
                                            [](double v) { return v > 0 && v <= 1; }));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_seed("seed", &s->seed));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_bool("stop_at_eos", &s->stop_at_eos));
  return absl::OkStatus();
}

absl::Status parse_harmoeny(const TomlTableReader& r, HarmoenySpec* h) {
  MUFLOW_TOPO_RETURN_IF_ERROR(r.check_keys(kHarmoenyKeys));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("q", &h->q, 0));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_choice("rebalance", &h->rebalance, kKnownRebalances));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_int("slots", &h->slots, 0));
  MUFLOW_TOPO_RETURN_IF_ERROR(r.read_bool("prefetch", &h->prefetch));
  return absl::OkStatus();
}

// Reads sub-table `key` of the root and runs `parse` on it when present.
template <typename Fn>
absl::Status with_table(const TomlTableReader& root, std::string_view key, Fn&& parse) {
  const toml::table* t = nullptr;
  MUFLOW_TOPO_RETURN_IF_ERROR(root.read_table(key, &t));
  if (t == nullptr) return absl::OkStatus();
  return parse(TomlTableReader(*t, root.source(), std::string(key)));
}

absl::StatusOr<Topology> parse_document(const toml::table& doc, const std::string& source,
                                        const fs::path& base_dir) {
  const TomlTableReader root(doc, source, "");
  MUFLOW_TOPO_RETURN_IF_ERROR(root.check_keys(kRootKeys));
  Topology topo = synthetic_demo_topology();
  topo.source = source;
  MUFLOW_TOPO_RETURN_IF_ERROR(root.read_choice("wiring", &topo.wiring, kKnownWirings));
  MUFLOW_TOPO_RETURN_IF_ERROR(root.read_choice("backend", &topo.backend, kKnownBackends));
  if (root.has("trace")) {
    MUFLOW_TOPO_RETURN_IF_ERROR(root.read_string("trace", &topo.trace_file));
    topo.trace_file = resolve_path(base_dir, topo.trace_file);
  }
  MUFLOW_TOPO_RETURN_IF_ERROR(with_table(root, "cluster", [&](const TomlTableReader& r) {
    MUFLOW_TOPO_RETURN_IF_ERROR(parse_cluster(r, topo.backend, &topo.devices,
                                              &topo.threads_per_device, &topo.devices_per_node));
    return topology_detail::parse_cluster_workers(r, base_dir, &topo);
  }));
  MUFLOW_TOPO_RETURN_IF_ERROR(with_table(root, "model", [&](const TomlTableReader& r) {
    return parse_model(r, base_dir, &topo.model);
  }));
  MUFLOW_TOPO_RETURN_IF_ERROR(with_table(root, "placement", [&](const TomlTableReader& r) {
    return parse_placement(r, base_dir, static_cast<int64_t>(topo.devices.size()),
                           topo.model.synthetic, &topo);
  }));
  MUFLOW_TOPO_RETURN_IF_ERROR(with_table(root, "scheduler", [&](const TomlTableReader& r) {
    return parse_scheduler(r, &topo.scheduler);
  }));
  MUFLOW_TOPO_RETURN_IF_ERROR(with_table(root, "workload", [&](const TomlTableReader& r) {
    topo.workload = WorkloadSpec{};
    const int64_t vocab = topo.model.synthetic ? topo.model.synthetic->vocab_size : 0;
    return topology_detail::parse_workload_table(r, base_dir, vocab, &topo.workload);
  }));
  MUFLOW_TOPO_RETURN_IF_ERROR(with_table(root, "sampling", [&](const TomlTableReader& r) {
    return parse_sampling(r, &topo.sampling);
  }));
  for (const auto& [table, owner] : kWiringTables) {
    if (topo.wiring != owner && root.has(std::string(table))) {
      return root.error(std::string(table),
                        "applies to wiring = \"" + std::string(owner) + "\" only");
    }
  }
  MUFLOW_TOPO_RETURN_IF_ERROR(with_table(root, "harmoeny", [&](const TomlTableReader& r) {
    return parse_harmoeny(r, &topo.harmoeny);
  }));
  for (std::string_view sim_only : {"router", "network", "cost"}) {
    if (topo.backend != "sim" && root.has(sim_only)) {
      return root.error(sim_only,
                        "applies to backend = \"sim\" only (the cpu backend routes "
                        "with the model's gate and hands batches over in memory)");
    }
  }
  MUFLOW_TOPO_RETURN_IF_ERROR(with_table(root, "router", [&](const TomlTableReader& r) {
    return topology_detail::parse_router_table(r, base_dir, &topo.router);
  }));
  MUFLOW_TOPO_RETURN_IF_ERROR(with_table(root, "network", [&](const TomlTableReader& r) {
    return topology_detail::parse_network_table(r, &topo.network);
  }));
  MUFLOW_TOPO_RETURN_IF_ERROR(with_table(root, "cost", [&](const TomlTableReader& r) {
    return topology_detail::parse_cost_table(r, base_dir, &topo.cost);
  }));
  if (topo.backend != "sim" && !topo.model.preset.empty()) {
    return absl::InvalidArgumentError(
        sv_cat(source,
               ": key 'model.preset': preset models have no weights; they run on "
               "backend = \"sim\" (give synthetic dims or a model folder for cpu and cuda)"));
  }
  if (topo.model.synthetic) {
    MUFLOW_TOPO_RETURN_IF_ERROR(check_topology_against_model(topo, *topo.model.synthetic));
  }
  return topo;
}

}  // namespace

namespace topology_detail {

std::string resolve_path(const fs::path& base_dir, std::string_view path) {
  fs::path p(path);
  if (p.is_relative()) p = base_dir / p;
  return p.lexically_normal().string();
}

absl::Status require_existing(const TomlTableReader& reader, std::string_view key,
                              const std::string& path, bool want_folder) {
  std::error_code ec;
  const bool ok = want_folder ? fs::is_directory(path, ec) : fs::is_regular_file(path, ec);
  if (ok) return absl::OkStatus();
  return absl::NotFoundError(sv_cat(reader.source(), ":", reader.line_of(key), ": key '",
                                    reader.dotted(key), "': no such ",
                                    want_folder ? "folder" : "file", " '", path, "'"));
}

}  // namespace topology_detail

absl::StatusOr<Topology> parse_topology_string(const std::string& text,
                                               const std::string& source_name,
                                               const std::string& base_dir) {
  std::error_code ec;
  fs::path base = fs::absolute(base_dir.empty() ? fs::path(".") : fs::path(base_dir), ec);
  if (ec) base = fs::path(base_dir);
  toml::table doc;
  try {
    doc = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    return absl::InvalidArgumentError(sv_cat(source_name, ":", where.line, ":", where.column,
                                             ": TOML syntax error: ", e.description()));
  }
  absl::StatusOr<Topology> topo = parse_document(doc, source_name, base.lexically_normal());
  if (topo.ok()) {
    topo->source_text = text;
    topo->base_dir = base.lexically_normal().string();
  }
  return topo;
}

absl::StatusOr<Topology> parse_topology_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return absl::NotFoundError(sv_cat("topology file '", path, "' does not exist"));
  }
  if (fs::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        sv_cat("topology file '", path, "' is a folder; expected a .toml file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::PermissionDeniedError(sv_cat("cannot read topology file '", path, "'"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  const fs::path folder = fs::absolute(fs::path(path), ec).parent_path();
  return parse_topology_string(text.str(), path, folder.string());
}

absl::Status check_topology_against_model(const Topology& topology,
                                          const model::ModelConfig& config) {
  if (topology.placement == "explicit" &&
      static_cast<int64_t>(topology.expert_device.size()) != config.num_experts) {
    return absl::InvalidArgumentError(
        sv_cat(topology.source, ": [placement] experts lists ", topology.expert_device.size(),
               " devices; the model has ", config.num_experts, " experts (one entry per expert)"));
  }
  for (int64_t d : topology.expert_device) {
    if (d < 0 || d >= static_cast<int64_t>(topology.devices.size())) {
      return absl::InvalidArgumentError(sv_cat(topology.source, ": [placement] device ", d,
                                               " is not in [0, ", topology.devices.size(), ")"));
    }
  }
  const auto& ids = topology.workload.prompt_ids;
  for (size_t i = 0; i < ids.size(); ++i) {
    for (size_t j = 0; j < ids[i].size(); ++j) {
      if (ids[i][j] < 0 || ids[i][j] >= config.vocab_size) {
        return absl::InvalidArgumentError(
            sv_cat(topology.source, ": [workload] prompt ", i, " position ", j, ": token id ",
                   ids[i][j], " is outside the model's vocabulary [0, ", config.vocab_size, ")"));
      }
    }
  }
  return absl::OkStatus();
}

int64_t resolve_threads_per_device(const Topology& topology, int64_t hardware_threads) {
  if (topology.threads_per_device > 0) return topology.threads_per_device;
  const int64_t devices = std::max<int64_t>(1, static_cast<int64_t>(topology.devices.size()));
  return std::clamp<int64_t>(std::max<int64_t>(hardware_threads, 1) / devices, 1,
                             kMaxThreadsPerDevice);
}

}  // namespace muflow::engine::topology
