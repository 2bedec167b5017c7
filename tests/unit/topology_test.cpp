// Topology file parser: every shipped example, the embedded default and the synthetic demo,
// and the error messages for bad files (file, line, key and what was expected).

#include "engine/topology/topology.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/topology/topology_override.hpp"
#include "scratch_path.hpp"

namespace muflow::engine {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A scratch folder for files the tests write, unique per test.
fs::path scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path dir = fs::temp_directory_path() / (std::string("muflow_topology_test_") + info->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// The message as std::string (Debian's Abseil has its own string_view, which gmock prints
// character by character).
std::string msg(const absl::Status& status) { return std::string(status.message()); }

absl::StatusOr<topology::Topology> parse(const std::string& text,
                                         const std::string& base = "/tmp") {
  return topology::parse_topology_string(text, "topo.toml", base);
}

TEST(Topology, EveryExampleFileParses) {
  const fs::path dir = fs::path(MUFLOW_SOURCE_DIR) / "topologies";
  const bool have_data = fs::exists(MUFLOW_DATA_DIR);
  int num_files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    ++num_files;
    absl::StatusOr<topology::Topology> topo = topology::parse_topology_file(entry.path().string());
    if (!have_data && absl::IsNotFound(topo.status())) {
      std::printf("skipping %s: it needs %s, which is absent\n", entry.path().c_str(),
                  MUFLOW_DATA_DIR);
      continue;
    }
    ASSERT_TRUE(topo.ok()) << entry.path() << ": " << topo.status();
    // File names start with their wiring (sync-*, async-*) or with the backend (sim-*).
    const std::string name = entry.path().filename().string();
    if (name.rfind("sim-", 0) != 0) {
      EXPECT_EQ(name.substr(0, name.find('-')), topo->wiring) << name;
    }
    EXPECT_FALSE(topo->devices.empty());
    EXPECT_TRUE(topo->model.synthetic.has_value() != !topo->model.path.empty());
  }
  EXPECT_GE(num_files, 4);
}

TEST(Topology, KjvExampleResolvesPathsAgainstItsFolder) {
  if (!fs::exists(MUFLOW_DATA_DIR)) GTEST_SKIP() << "needs " << MUFLOW_DATA_DIR;
  const fs::path file = fs::path(MUFLOW_SOURCE_DIR) / "topologies" / "sync-kjv-4cpu.toml";
  absl::StatusOr<topology::Topology> topo = topology::parse_topology_file(file.string());
  ASSERT_TRUE(topo.ok()) << topo.status();
  EXPECT_EQ(topo->devices.size(), 4u);
  EXPECT_EQ(topo->devices[3].name, "cpu3");
  EXPECT_TRUE(fs::path(topo->model.path).is_absolute());
  EXPECT_TRUE(fs::exists(fs::path(topo->model.path) / "config.json")) << topo->model.path;
  EXPECT_EQ(topo->workload.kind, "prompts");
  EXPECT_TRUE(fs::exists(topo->workload.prompts_file));
  EXPECT_EQ(topo->workload.max_new_tokens, 24);
  EXPECT_TRUE(fs::path(topo->trace_file).is_absolute());
}

TEST(Topology, SyntheticExampleFillsEveryField) {
  const fs::path file = fs::path(MUFLOW_SOURCE_DIR) / "topologies" / "sync-synthetic-8cpu.toml";
  absl::StatusOr<topology::Topology> topo = topology::parse_topology_file(file.string());
  ASSERT_TRUE(topo.ok()) << topo.status();
  ASSERT_EQ(topo->devices.size(), 8u);
  EXPECT_EQ(topo->devices[5].name, "cpu5");
  EXPECT_EQ(topo->devices[5].node, "node1");
  EXPECT_EQ(topo->devices[0].node, "node0");
  ASSERT_TRUE(topo->model.synthetic.has_value());
  const model::ModelConfig& c = *topo->model.synthetic;
  EXPECT_EQ(c.model_type, model::ModelType::kMixtral);
  EXPECT_EQ(c.vocab_size, 1024);
  EXPECT_EQ(c.hidden_size, 256);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.num_experts, 16);
  EXPECT_EQ(topo->model.seed, 7u);
  EXPECT_EQ(topo->placement, "explicit");
  ASSERT_EQ(topo->expert_device.size(), 16u);
  EXPECT_EQ(topo->expert_device[9], 1);
  EXPECT_EQ(topo->scheduler.policy, "most-tokens");
  EXPECT_EQ(topo->workload.kind, "poisson");
  EXPECT_EQ(topo->workload.num_requests, 64);
  EXPECT_DOUBLE_EQ(topo->workload.rate_per_s, 8.0);
  EXPECT_EQ(topo->workload.input_min, 16);
  EXPECT_EQ(topo->workload.output_max, 32);
  EXPECT_DOUBLE_EQ(topo->sampling.temperature, 0.8);
  EXPECT_FALSE(topo->sampling.stop_at_eos);
  EXPECT_TRUE(topo->trace_file.empty());
}

TEST(Topology, QwenExampleSetsQwenDefaults) {
  const fs::path file = fs::path(MUFLOW_SOURCE_DIR) / "topologies" / "sync-qwen2moe-2cpu.toml";
  absl::StatusOr<topology::Topology> topo = topology::parse_topology_file(file.string());
  ASSERT_TRUE(topo.ok()) << topo.status();
  const model::ModelConfig& c = *topo->model.synthetic;
  EXPECT_EQ(c.model_type, model::ModelType::kQwen2Moe);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_EQ(c.shared_expert_ffn, 256);
  EXPECT_EQ(c.head_dim, 32);  // hidden / heads when not given
  EXPECT_EQ(topo->model.dtype, "bf16");
  ASSERT_EQ(topo->workload.prompt_ids.size(), 3u);
  EXPECT_EQ(topo->workload.prompt_ids[1][2], 1000);
}

TEST(Topology, DefaultTopologyServesTheShippedKjvModel) {
  const char* env = std::getenv("MUFLOW_MODELS_DIR");
  if (env != nullptr && *env != '\0') GTEST_SKIP() << "MUFLOW_MODELS_DIR is set: " << env;
  absl::StatusOr<topology::Topology> t = topology::default_topology();
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->source, "<embedded default>");
  EXPECT_EQ(t->wiring, "sync");
  EXPECT_EQ(t->backend, "cpu");
  ASSERT_EQ(t->devices.size(), 2u);
  EXPECT_EQ(t->devices[0].name, "cpu0");
  EXPECT_EQ(t->devices[1].name, "cpu1");
  EXPECT_FALSE(t->model.synthetic.has_value());
  EXPECT_EQ(t->model.path, (fs::path(MUFLOW_SOURCE_DIR) / "models" / "kjv-mixtral-tiny-bf16")
                               .lexically_normal()
                               .string());
  EXPECT_TRUE(fs::is_regular_file(fs::path(t->model.path) / "model.safetensors"));
  EXPECT_TRUE(fs::is_regular_file(fs::path(t->model.path) / "tokenizer.model"));
  EXPECT_EQ(t->placement, "round-robin");
  EXPECT_EQ(t->workload.kind, "prompts");
  EXPECT_TRUE(t->workload.prompts_file.empty());
  ASSERT_EQ(t->workload.prompts.size(), topology::kDefaultPrompts.size());
  EXPECT_EQ(t->workload.prompts[0], "And God said, Let there be");
  EXPECT_EQ(t->workload.max_new_tokens, topology::kDefaultMaxNewTokens);
  EXPECT_DOUBLE_EQ(t->sampling.temperature, 0.0);
  EXPECT_TRUE(t->sampling.stop_at_eos);
  EXPECT_TRUE(t->trace_file.empty());
}

TEST(Topology, SyntheticDemoTopology) {
  const topology::Topology t = topology::synthetic_demo_topology();
  EXPECT_EQ(t.source, "<embedded synthetic demo>");
  EXPECT_EQ(t.wiring, "sync");
  ASSERT_EQ(t.devices.size(), 4u);
  EXPECT_EQ(t.devices[0].name, "cpu0");
  EXPECT_EQ(t.devices[3].name, "cpu3");
  ASSERT_TRUE(t.model.synthetic.has_value());
  EXPECT_EQ(t.model.seed, 0u);
  EXPECT_EQ(t.model.dtype, "f32");
  const model::ModelConfig c = topology::default_synthetic_config();
  EXPECT_TRUE(c.validate().ok()) << c.validate();
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_topk, 2);
  EXPECT_EQ(t.workload.kind, "ids");
  ASSERT_GE(t.workload.prompt_ids.size(), 4u);
  size_t shortest = 1000, longest = 0;
  for (const auto& p : t.workload.prompt_ids) {
    shortest = std::min(shortest, p.size());
    longest = std::max(longest, p.size());
    for (int32_t id : p) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, c.vocab_size);
    }
  }
  EXPECT_EQ(shortest, 3u);
  EXPECT_EQ(longest, 20u);
  EXPECT_EQ(t.workload.max_new_tokens, 16);
  EXPECT_DOUBLE_EQ(t.sampling.temperature, 0.0);
  EXPECT_TRUE(t.trace_file.empty());
  EXPECT_TRUE(topology::check_topology_against_model(t, c).ok());
}

// A topology file starts from the synthetic demo (not the shipped model): what it leaves out
// needs no model files.
TEST(Topology, EmptyFileIsTheSyntheticDemo) {
  absl::StatusOr<topology::Topology> topo = parse("");
  ASSERT_TRUE(topo.ok()) << topo.status();
  EXPECT_EQ(topo->source, "topo.toml");
  EXPECT_EQ(topo->devices.size(), 4u);
  EXPECT_TRUE(topo->model.synthetic.has_value());
  EXPECT_TRUE(topo->model.path.empty());
  EXPECT_EQ(topo->workload.prompt_ids, topology::synthetic_demo_topology().workload.prompt_ids);
}

TEST(Topology, SyntaxErrorNamesLineAndColumn) {
  absl::StatusOr<topology::Topology> topo = parse("wiring = \"sync\"\n\n[model\nhidden = 4\n");
  ASSERT_FALSE(topo.ok());
  EXPECT_EQ(topo.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(msg(topo.status()), HasSubstr("topo.toml:3:"));
  EXPECT_THAT(msg(topo.status()), HasSubstr("TOML syntax error"));
}

TEST(Topology, UnknownKeyListsTheAllowedOnes) {
  absl::StatusOr<topology::Topology> topo =
      parse("wiring = \"sync\"\n\n[model]\ntype = \"mixtral\"\nvocab = 512\n\nhiden = 128\n");
  ASSERT_FALSE(topo.ok());
  EXPECT_THAT(msg(topo.status()),
              HasSubstr("topo.toml:7: unknown key 'model.hiden'; expected one of: path, type, "
                        "vocab, hidden"));
  absl::StatusOr<topology::Topology> root = parse("wirring = \"sync\"\n");
  ASSERT_FALSE(root.ok());
  EXPECT_THAT(msg(root.status()), HasSubstr("topo.toml:1: unknown key 'wirring'"));
}

TEST(Topology, WrongTypeNamesKeyAndTypes) {
  absl::StatusOr<topology::Topology> topo =
      parse("[workload]\nkind = \"ids\"\nprompts = [[1, 2]]\nmax_new_tokens = \"many\"\n");
  ASSERT_FALSE(topo.ok());
  EXPECT_EQ(msg(topo.status()),
            "topo.toml:4: key 'workload.max_new_tokens': expected a positive integer, got "
            "string");
  absl::StatusOr<topology::Topology> negative = parse("[cluster]\nnum_devices = -2\n");
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(msg(negative.status()),
              HasSubstr("topo.toml:2: key 'cluster.num_devices': expected a positive integer, "
                        "got -2"));
}

TEST(Topology, ShorthandDevicesPerNodeGroupsConsecutiveDevices) {
  absl::StatusOr<topology::Topology> topo = parse(
      "backend = \"sim\"\n[cluster]\nnum_devices = 10\ndevices_per_node = 4\n"
      "kind = \"H100-SXM\"\n[model]\npreset = \"mixtral-8x7b\"\n");
  ASSERT_TRUE(topo.ok()) << topo.status();
  ASSERT_EQ(topo->devices.size(), 10u);
  EXPECT_EQ(topo->devices[0].node, "node0");
  EXPECT_EQ(topo->devices[3].node, "node0");
  EXPECT_EQ(topo->devices[4].node, "node1");
  EXPECT_EQ(topo->devices[9].node, "node2");
  absl::StatusOr<topology::Topology> flat =
      parse("[cluster]\nnum_devices = 3\n");  // default: one node
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->devices[2].node, "node0");
  absl::StatusOr<topology::Topology> both =
      parse("[cluster]\ndevices_per_node = 2\n[[cluster.devices]]\nname = \"a\"\n");
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(msg(both.status()), HasSubstr("not both"));
  absl::StatusOr<topology::Topology> negative =
      parse("[cluster]\nnum_devices = 2\ndevices_per_node = -1\n");
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(msg(negative.status()), HasSubstr("cluster.devices_per_node"));
  // A cluster.num_devices sweep keeps the grouping.
  topology::Topology grown = *topo;
  ASSERT_TRUE(engine::topology::apply_topology_override(grown, "cluster.num_devices", "9").ok());
  ASSERT_EQ(grown.devices.size(), 9u);
  EXPECT_EQ(grown.devices[7].node, "node1");
  EXPECT_EQ(grown.devices[8].node, "node2");
}

TEST(Topology, UnknownWiringListsTheKnownOnes) {
  absl::StatusOr<topology::Topology> topo = parse("backend = \"cpu\"\nwiring = \"warp\"\n");
  ASSERT_FALSE(topo.ok());
  EXPECT_EQ(msg(topo.status()),
            "topo.toml:2: key 'wiring': expected one of: sync, async, harmoeny, moeshard, exflow, "
            "async-replicated; got 'warp'");
  absl::StatusOr<topology::Topology> backend = parse("backend = \"tpu\"\n");
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(msg(backend.status()), HasSubstr("expected one of: cpu, cuda, sim; got 'tpu'"));
}

// backend "cuda": devices default to kind "cuda", and only that kind is accepted (whether a
// GPU exists is the backend's question, not the parser's).
TEST(Topology, CudaBackendTakesCudaDevicesOnly) {
  absl::StatusOr<topology::Topology> topo =
      parse("backend = \"cuda\"\n[cluster]\nnum_devices = 2\n[model]\nhidden = 64\n");
  ASSERT_TRUE(topo.ok()) << topo.status();
  EXPECT_EQ(topo->backend, "cuda");
  ASSERT_EQ(topo->devices.size(), 2u);
  EXPECT_EQ(topo->devices[0].kind, "cuda");
  EXPECT_EQ(topo->devices[1].name, "cuda1");
  absl::StatusOr<topology::Topology> cpu_kind =
      parse("backend = \"cuda\"\n[cluster]\nnum_devices = 2\nkind = \"cpu\"\n");
  ASSERT_FALSE(cpu_kind.ok());
  EXPECT_THAT(
      msg(cpu_kind.status()),
      HasSubstr(
          "topo.toml:4: key 'cluster.kind': backend 'cuda' runs devices of kind 'cuda' only"));
  absl::StatusOr<topology::Topology> preset =
      parse("backend = \"cuda\"\n[model]\npreset = \"mixtral-8x7b\"\n");
  ASSERT_FALSE(preset.ok());
  EXPECT_THAT(msg(preset.status()), HasSubstr("preset models have no weights"));
}

TEST(Topology, AsyncKeys) {
  absl::StatusOr<topology::Topology> topo = parse(
      "wiring = \"async\"\n[cluster]\nnum_devices = 6\n[placement]\nattention_devices = 2\n"
      "[scheduler]\nmax_batch_tokens = 64\npolicy = \"defrag\"\n");
  ASSERT_TRUE(topo.ok()) << topo.status();
  EXPECT_EQ(topo->wiring, "async");
  EXPECT_EQ(topo->attention_devices, 2);
  EXPECT_EQ(topo->scheduler.max_batch_tokens, 64);
  absl::StatusOr<topology::Topology> all =
      parse("[cluster]\nnum_devices = 4\n[placement]\nattention_devices = 4\n");
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(msg(all.status()),
            "topo.toml:4: key 'placement.attention_devices': expected fewer attention devices "
            "than the cluster's 4 devices (the rest host the experts), got 4");
  absl::StatusOr<topology::Topology> zero = parse("[scheduler]\nmax_batch_tokens = 0\n");
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(msg(zero.status()), HasSubstr("topo.toml:2: key 'scheduler.max_batch_tokens'"));
  // A stage run's rows are bounded at load (kMaxBatchTokens), not by a failed launch later.
  for (const char* key : {"max_batch_tokens", "max_prefill_tokens"}) {
    absl::StatusOr<topology::Topology> huge =
        parse(absl::StrCat("[scheduler]\n", key, " = 1048577\n"));
    ASSERT_FALSE(huge.ok()) << key;
    EXPECT_THAT(msg(huge.status()), HasSubstr(absl::StrCat("topo.toml:2: key 'scheduler.", key)));
    EXPECT_TRUE(parse(absl::StrCat("[scheduler]\n", key, " = 1048576\n")).ok()) << key;
  }
}

TEST(Topology, HarmoenyKeys) {
  absl::StatusOr<topology::Topology> topo = parse(
      "wiring = \"harmoeny\"\n[harmoeny]\nq = 1024\nrebalance = \"code\"\nslots = 4\n"
      "prefetch = false\n");
  ASSERT_TRUE(topo.ok()) << topo.status();
  EXPECT_EQ(topo->harmoeny.q, 1024);
  EXPECT_EQ(topo->harmoeny.rebalance, "code");
  EXPECT_EQ(topo->harmoeny.slots, 4);
  EXPECT_FALSE(topo->harmoeny.prefetch);
  absl::StatusOr<topology::Topology> defaults = parse("wiring = \"moeshard\"\n");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->harmoeny.q, 0) << "0 = Eq. 4";
  EXPECT_EQ(defaults->harmoeny.rebalance, "paper");
  EXPECT_TRUE(defaults->harmoeny.prefetch);
  absl::StatusOr<topology::Topology> wrong_wiring = parse("wiring = \"sync\"\n[harmoeny]\nq = 3\n");
  ASSERT_FALSE(wrong_wiring.ok());
  EXPECT_THAT(msg(wrong_wiring.status()),
              HasSubstr("key 'harmoeny': applies to wiring = \"harmoeny\" only"));
  absl::StatusOr<topology::Topology> bad =
      parse("wiring = \"harmoeny\"\n[harmoeny]\nrebalance = \"greedy\"\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(msg(bad.status()), HasSubstr("topo.toml:3: key 'harmoeny.rebalance': expected one "
                                           "of: paper, code; got 'greedy'"));
  EXPECT_FALSE(parse("wiring = \"harmoeny\"\n[harmoeny]\nq = -1\n").ok());
  EXPECT_FALSE(parse("wiring = \"harmoeny\"\n[harmoeny]\nwindow = 2\n").ok());
}

TEST(Topology, AllToAllOrderKey) {
  const std::string sim =
      "backend = \"sim\"\n[cluster]\nnum_devices = 2\nkind = \"A100-80GB\"\n"
      "[model]\npreset = \"switch-base-8\"\n[network]\n";
  absl::StatusOr<topology::Topology> defaults = parse(sim);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->network.a2a_order, "row_major");
  absl::StatusOr<topology::Topology> aurora = parse(sim + "a2a_order = \"aurora\"\n");
  ASSERT_TRUE(aurora.ok()) << aurora.status();
  EXPECT_EQ(aurora->network.a2a_order, "aurora");
  absl::StatusOr<topology::Topology> bad = parse(sim + "a2a_order = \"fastest\"\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(msg(bad.status()),
              HasSubstr("topo.toml:8: key 'network.a2a_order': expected one of: row_major, random, "
                        "sjf, aurora, aurora_chunked, aurora_unsplit; got 'fastest'"));
  topology::Topology t = *defaults;
  ASSERT_TRUE(engine::topology::apply_topology_override(t, "network.a2a_order", "sjf").ok());
  EXPECT_EQ(t.network.a2a_order, "sjf");
  EXPECT_FALSE(engine::topology::apply_topology_override(t, "network.a2a_order", "fifo").ok());
}

TEST(Topology, NetworkModelKey) {
  const std::string sim =
      "backend = \"sim\"\n[cluster]\nnum_devices = 2\nkind = \"A100-80GB\"\n"
      "[model]\npreset = \"switch-base-8\"\n[network]\n";
  absl::StatusOr<topology::Topology> defaults = parse(sim);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->network.model, "serial");
  absl::StatusOr<topology::Topology> fair = parse(sim + "model = \"fair-share\"\n");
  ASSERT_TRUE(fair.ok()) << fair.status();
  EXPECT_EQ(fair->network.model, "fair-share");
  absl::StatusOr<topology::Topology> bad = parse(sim + "model = \"fluid\"\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(msg(bad.status()), HasSubstr("topo.toml:8: key 'network.model': expected one of: "
                                           "serial, fair-share; got 'fluid'"));
  topology::Topology t = *defaults;
  ASSERT_TRUE(engine::topology::apply_topology_override(t, "network.model", "fair-share").ok());
  EXPECT_EQ(t.network.model, "fair-share");
  EXPECT_FALSE(engine::topology::apply_topology_override(t, "network.model", "fifo").ok());
}

TEST(Topology, DefragKeys) {
  absl::StatusOr<topology::Topology> d =
      parse("wiring = \"async\"\n[scheduler]\npolicy = \"defrag\"\n");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->scheduler.defrag_lookahead, 3);  // DisagMoE's main branch (scheduling_policy.hpp)
  EXPECT_EQ(d->scheduler.defrag_decay, 0.8);
  absl::StatusOr<topology::Topology> t = parse(
      "wiring = \"async\"\n[scheduler]\npolicy = \"defrag\"\ndefrag_lookahead = 7\n"
      "defrag_decay = 0.5\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->scheduler.defrag_lookahead, 7);
  EXPECT_EQ(t->scheduler.defrag_decay, 0.5);
  absl::StatusOr<topology::Topology> bad =
      parse("wiring = \"async\"\n[scheduler]\ndefrag_decay = 1.5\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(msg(bad.status()),
              HasSubstr("topo.toml:3: key 'scheduler.defrag_decay': expected a number in [0, 1]"));
  EXPECT_FALSE(parse("[scheduler]\ndefrag_lookahead = -1\n").ok());
  topology::Topology o = *d;
  ASSERT_TRUE(engine::topology::apply_topology_override(o, "scheduler.defrag_lookahead", "7").ok());
  EXPECT_EQ(o.scheduler.defrag_lookahead, 7);
  ASSERT_TRUE(engine::topology::apply_topology_override(o, "scheduler.defrag_decay", "0.6").ok());
  EXPECT_EQ(o.scheduler.defrag_decay, 0.6);
  EXPECT_FALSE(engine::topology::apply_topology_override(o, "scheduler.defrag_decay", "2").ok());
}

TEST(Topology, CostKeys) {
  const std::string sim =
      "backend = \"sim\"\n[cluster]\nnum_devices = 2\nkind = \"A100-80GB\"\n"
      "[model]\npreset = \"switch-base-8\"\n";
  absl::StatusOr<topology::Topology> defaults = parse(sim);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->cost.of("A100-80GB").stage_us, 0.0);
  EXPECT_EQ(defaults->cost.of("A100-80GB").scheduler_us, 0.0);
  EXPECT_FALSE(defaults->cost.expert_ffn.has_value());

  const std::string csv =
      std::string(MUFLOW_DATA_DIR) + "/kernels/v100-switch-expert-time-vs-tokens.csv";
  // The CSV is in ../shared/data; without it the [cost.expert_ffn] checks are left out.
  const bool have_csv = fs::exists(csv);
  absl::StatusOr<topology::Topology> t =
      parse(sim +
            "[cost]\nstage_overhead_us = 25\nscheduler_overhead_us = 4.5\n"
            "attention_overhead_us = 2500\nexpert_overhead_us = 0.5\n"
            "[cost.kinds.\"V100-32GB\"]\nstage_overhead_us = 60\n" +
            (have_csv ? "[cost.expert_ffn]\nfile = \"" + csv + "\"\nhidden = 768\nffn = 3072\n"
                      : std::string()));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->cost.of("A100-80GB").stage_us, 25.0);
  EXPECT_EQ(t->cost.of("A100-80GB").scheduler_us, 4.5);
  EXPECT_EQ(t->cost.of("V100-32GB").stage_us, 60.0);
  EXPECT_EQ(t->cost.of("V100-32GB").scheduler_us, 4.5);  // not given: the [cost] value
  EXPECT_EQ(t->cost.of("A100-80GB").attention_us, 2500.0);
  EXPECT_EQ(t->cost.of("A100-80GB").expert_us, 0.5);
  EXPECT_EQ(t->cost.of("V100-32GB").attention_us, 2500.0);
  if (have_csv) {
    ASSERT_TRUE(t->cost.expert_ffn.has_value());
    EXPECT_EQ(t->cost.expert_ffn->kind, "V100-32GB");
    EXPECT_EQ(t->cost.expert_ffn->ffn_kind, "two-layer");
  }

  struct Bad {
    std::string text, expected;
  };
  std::vector<Bad> bads{
      {"[cost]\nstage_overhead_us = -1\n",
       "topo.toml:8: key 'cost.stage_overhead_us': expected microseconds in [0, 1e6], got -1"},
      {"[cost]\nlaunch_us = 1\n", "unknown key 'cost.launch_us'"},
      {"[cost]\nattention_overhead_us = 2e6\n",
       "key 'cost.attention_overhead_us': expected microseconds in [0, 1e6]"},
      {"[cost.kinds.\"B200\"]\nstage_overhead_us = 1\n", "key 'cost.kinds.B200'"},
      {"[cost.kinds.\"H200\"]\nhost_us = 1\n", "unknown key 'cost.kinds.H200.host_us'"},
      {"[cost.expert_ffn]\nhidden = 768\n", "[cost.expert_ffn] needs file"},
      {"[cost.expert_ffn]\nfile = \"/nonexistent/k.csv\"\n", "cost.expert_ffn.file"},
  };
  if (have_csv) {
    bads.push_back({"[cost.expert_ffn]\nfile = \"" + csv + "\"\nffn_kind = \"glu\"\n",
                    "key 'cost.expert_ffn.ffn_kind': expected one of: two-layer, swiglu"});
  }
  for (const Bad& b : bads) {
    absl::StatusOr<topology::Topology> bad = parse(sim + b.text);
    ASSERT_FALSE(bad.ok()) << b.text;
    EXPECT_THAT(msg(bad.status()), HasSubstr(b.expected));
  }
  // The cpu backend measures its time: [cost] is refused there.
  absl::StatusOr<topology::Topology> cpu =
      parse("backend = \"cpu\"\n[cost]\nstage_overhead_us = 1\n");
  ASSERT_FALSE(cpu.ok());
  EXPECT_THAT(msg(cpu.status()), HasSubstr("applies to backend = \"sim\" only"));

  topology::Topology o = *defaults;
  ASSERT_TRUE(engine::topology::apply_topology_override(o, "cost.stage_overhead_us", "12").ok());
  ASSERT_TRUE(engine::topology::apply_topology_override(o, "cost.scheduler_overhead_us", "3").ok());
  EXPECT_EQ(o.cost.of("A100-80GB").stage_us, 12.0);
  EXPECT_EQ(o.cost.of("A100-80GB").scheduler_us, 3.0);
  EXPECT_FALSE(engine::topology::apply_topology_override(o, "cost.stage_overhead_us", "-2").ok());
  ASSERT_TRUE(engine::topology::apply_topology_override(o, "cost.attention_overhead_us", "7").ok());
  ASSERT_TRUE(engine::topology::apply_topology_override(o, "cost.expert_overhead_us", "8").ok());
  EXPECT_EQ(o.cost.of("A100-80GB").attention_us, 7.0);
  EXPECT_EQ(o.cost.of("A100-80GB").expert_us, 8.0);

  // The run spread's seed: 1 unless given, 0 turns the spread off; a sweep key.
  EXPECT_EQ(defaults->cost.spread_seed, 1u);
  absl::StatusOr<topology::Topology> seeded = parse(sim + "[cost]\nspread_seed = 0\n");
  ASSERT_TRUE(seeded.ok()) << seeded.status();
  EXPECT_EQ(seeded->cost.spread_seed, 0u);
  absl::StatusOr<topology::Topology> negative = parse(sim + "[cost]\nspread_seed = -3\n");
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(msg(negative.status()), HasSubstr("topo.toml:8: key 'cost.spread_seed'"));
  ASSERT_TRUE(engine::topology::apply_topology_override(o, "cost.spread_seed", "5").ok());
  EXPECT_EQ(o.cost.spread_seed, 5u);
  EXPECT_FALSE(engine::topology::apply_topology_override(o, "cost.spread_seed", "-1").ok());
  EXPECT_FALSE(engine::topology::apply_topology_override(o, "cost.spread_seed", "x").ok());
}

// A sweep value is bounded as the parser bounds the same key in a file (a prompt length, a
// token cap), and [cost], refused on a cpu topology's file, is refused by a sweep too.
TEST(Topology, SweepValuesHaveTheParsersBounds) {
  absl::StatusOr<topology::Topology> sim = parse("backend = \"sim\"\n");
  ASSERT_TRUE(sim.ok()) << sim.status();
  topology::Topology t = *sim;
  EXPECT_TRUE(engine::topology::apply_topology_override(t, "workload.input", "16:16777216").ok());
  EXPECT_EQ(t.workload.input_max, 16777216);
  const absl::Status long_prompt =
      engine::topology::apply_topology_override(t, "workload.input", "16:16777217");
  ASSERT_FALSE(long_prompt.ok());
  EXPECT_THAT(msg(long_prompt), HasSubstr("LO:HI with 1 <= LO <= HI <= 16777216"));
  EXPECT_EQ(t.workload.input_max, 16777216);  // unchanged by the refused value
  EXPECT_FALSE(engine::topology::apply_topology_override(t, "workload.output", "1:99999999").ok());
  EXPECT_TRUE(
      engine::topology::apply_topology_override(t, "scheduler.max_prefill_tokens", "1048576").ok());
  EXPECT_FALSE(
      engine::topology::apply_topology_override(t, "scheduler.max_prefill_tokens", "1048577").ok());
  EXPECT_FALSE(
      engine::topology::apply_topology_override(t, "scheduler.max_batch_tokens", "1048577").ok());
  EXPECT_TRUE(engine::topology::apply_topology_override(t, "cost.expert_overhead_us", "5").ok());

  absl::StatusOr<topology::Topology> cpu = parse("backend = \"cpu\"\n");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  topology::Topology c = *cpu;
  for (const char* key :
       {"cost.stage_overhead_us", "cost.scheduler_overhead_us", "cost.attention_overhead_us",
        "cost.expert_overhead_us", "cost.spread_seed"}) {
    const absl::Status s = engine::topology::apply_topology_override(c, key, "1");
    ASSERT_FALSE(s.ok()) << key;
    EXPECT_THAT(msg(s), HasSubstr("applies to backend = \"sim\" only")) << key;
  }
}

TEST(Topology, AffinityPlacementKeys) {
  const fs::path dir = muflow::testing::scratch_path("topology_affinity");
  fs::create_directories(dir);
  std::ofstream(dir / "paths.csv") << "request_id,position,block,experts,weights\n";
  const std::string base = "wiring = \"exflow\"\n[placement]\n";
  absl::StatusOr<topology::Topology> topo = topology::parse_topology_string(
      base +
          "experts = \"affinity\"\npaths = \"paths.csv\"\nplanner = \"milp\"\n"
          "time_limit_s = 2.5\n",
      "topo.toml", dir.string());
  ASSERT_TRUE(topo.ok()) << topo.status();
  EXPECT_EQ(topo->placement, "affinity");
  EXPECT_EQ(topo->affinity_paths, (dir / "paths.csv").string());
  EXPECT_EQ(topo->affinity_planner, "milp");
  EXPECT_DOUBLE_EQ(topo->affinity_time_limit_s, 2.5);
  absl::StatusOr<topology::Topology> no_paths =
      topology::parse_topology_string(base + "experts = \"affinity\"\n", "topo.toml", dir.string());
  ASSERT_FALSE(no_paths.ok());
  EXPECT_THAT(msg(no_paths.status()),
              HasSubstr("topo.toml:3: key 'placement.experts': experts = \"affinity\" needs "
                        "paths = \"...\""));
  absl::StatusOr<topology::Topology> missing = topology::parse_topology_string(
      base + "experts = \"affinity\"\npaths = \"nope.csv\"\n", "topo.toml", dir.string());
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(msg(missing.status()), HasSubstr("key 'placement.paths': no such file"));
  absl::StatusOr<topology::Topology> stray =
      topology::parse_topology_string(base + "planner = \"milp\"\n", "topo.toml", dir.string());
  ASSERT_FALSE(stray.ok());
  EXPECT_THAT(msg(stray.status()),
              HasSubstr("key 'placement.planner': applies to experts = \"affinity\" only"));
  absl::StatusOr<topology::Topology> bad_planner = topology::parse_topology_string(
      base + "experts = \"affinity\"\npaths = \"paths.csv\"\nplanner = \"cbc\"\n", "topo.toml",
      dir.string());
  ASSERT_FALSE(bad_planner.ok());
  EXPECT_THAT(msg(bad_planner.status()), HasSubstr("expected one of: heuristic, milp"));
}

TEST(Topology, PlacementOutOfRange) {
  absl::StatusOr<topology::Topology> topo =
      parse("[cluster]\nnum_devices = 2\n[placement]\nexperts = [0, 1, 2, 0, 1, 0, 1, 0]\n");
  ASSERT_FALSE(topo.ok());
  EXPECT_THAT(msg(topo.status()),
              HasSubstr("topo.toml:4: key 'placement.experts': expected \"round-robin\" or an "
                        "array of device indices in [0, 2), got 2 for expert 2"));
  absl::StatusOr<topology::Topology> short_list = parse("[placement]\nexperts = [0, 1, 2]\n");
  ASSERT_FALSE(short_list.ok());
  EXPECT_THAT(msg(short_list.status()), HasSubstr("(8 entries), got 3"));
  absl::StatusOr<topology::Topology> ok =
      parse("[placement]\nexperts = [3, 2, 1, 0, 3, 2, 1, 0]\n");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->placement, "explicit");
  EXPECT_EQ(ok->expert_device[0], 3);
}

TEST(Topology, RangeMinGreaterThanMax) {
  absl::StatusOr<topology::Topology> topo =
      parse("[workload]\nkind = \"poisson\"\ninput = [64, 16]\n");
  ASSERT_FALSE(topo.ok());
  EXPECT_THAT(msg(topo.status()),
              HasSubstr("topo.toml:3: key 'workload.input': expected [min, max] with positive "
                        "integers and min <= max, got [64, 16]"));
}

TEST(Topology, KeyOfAnotherWorkloadKind) {
  absl::StatusOr<topology::Topology> topo =
      parse("[workload]\nkind = \"prompts\"\nprompts = [\"a\"]\nrate = 3.0\n");
  ASSERT_FALSE(topo.ok());
  EXPECT_THAT(msg(topo.status()),
              HasSubstr("topo.toml:4: key 'workload.rate': applies to kind = \"poisson\", not "
                        "kind = \"prompts\""));
}

TEST(Topology, MissingPromptsFileIsNotFound) {
  const fs::path dir = scratch_dir();
  absl::StatusOr<topology::Topology> topo =
      parse("[workload]\nkind = \"prompts\"\nfile = \"prompts/none.txt\"\n", dir.string());
  ASSERT_FALSE(topo.ok());
  EXPECT_EQ(topo.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(msg(topo.status()), HasSubstr("topo.toml:3: key 'workload.file'"));
  EXPECT_THAT(msg(topo.status()), HasSubstr((dir / "prompts/none.txt").string()));
}

TEST(Topology, RelativePathsResolveAgainstTheFilesFolder) {
  const fs::path dir = scratch_dir();
  write_file(dir / "conf" / "prompts" / "p.txt", "hello\n");
  fs::create_directories(dir / "models" / "m");
  write_file(dir / "conf" / "t.toml",
             "trace = \"../out/t.json\"\n[model]\npath = \"../models/m\"\n"
             "[workload]\nkind = \"prompts\"\nfile = \"prompts/p.txt\"\n");
  // A relative path to the topology file itself: resolution must not depend on it.
  const fs::path cwd = fs::current_path();
  fs::current_path(dir);
  absl::StatusOr<topology::Topology> topo = topology::parse_topology_file("conf/t.toml");
  fs::current_path(cwd);
  ASSERT_TRUE(topo.ok()) << topo.status();
  EXPECT_EQ(topo->model.path, (dir / "models" / "m").string());
  EXPECT_FALSE(topo->model.synthetic.has_value());
  EXPECT_EQ(topo->workload.prompts_file, (dir / "conf" / "prompts" / "p.txt").string());
  EXPECT_EQ(topo->trace_file, (dir / "out" / "t.json").string());
}

TEST(Topology, MissingTopologyFileIsNotFound) {
  absl::StatusOr<topology::Topology> topo =
      topology::parse_topology_file("/nonexistent/dir/topo.toml");
  ASSERT_FALSE(topo.ok());
  EXPECT_EQ(topo.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(msg(topo.status()), HasSubstr("/nonexistent/dir/topo.toml"));
}

TEST(Topology, ModelPathAndDimsAreExclusive) {
  const fs::path dir = scratch_dir();
  absl::StatusOr<topology::Topology> topo =
      parse("[model]\npath = \".\"\nhidden = 64\n", dir.string());
  ASSERT_FALSE(topo.ok());
  EXPECT_THAT(msg(topo.status()), HasSubstr("topo.toml:3: key 'model.hidden'"));
  EXPECT_THAT(msg(topo.status()), HasSubstr("not both"));
}

TEST(Topology, SyntheticModelConsistencyChecks) {
  absl::StatusOr<topology::Topology> kv = parse("[model]\nheads = 4\nkv_heads = 3\n");
  ASSERT_FALSE(kv.ok());
  EXPECT_THAT(msg(kv.status()), HasSubstr("key 'model.kv_heads'"));
  absl::StatusOr<topology::Topology> topk = parse("[model]\nexperts = 4\ntopk = 5\n");
  ASSERT_FALSE(topk.ok());
  EXPECT_THAT(msg(topk.status()), HasSubstr("topo.toml:3: key 'model.topk'"));
  absl::StatusOr<topology::Topology> shared = parse("[model]\nshared_ffn = 64\n");
  ASSERT_FALSE(shared.ok());
  EXPECT_THAT(msg(shared.status()), HasSubstr("mixtral has no shared expert"));
  absl::StatusOr<topology::Topology> dtype = parse("[model]\ndtype = \"f16\"\n");
  ASSERT_FALSE(dtype.ok());
  EXPECT_THAT(msg(dtype.status()), HasSubstr("expected one of: f32, bf16; got 'f16'"));
  absl::StatusOr<topology::Topology> compute = parse("[model]\ncompute = \"fp8\"\n");
  ASSERT_FALSE(compute.ok());
  EXPECT_THAT(msg(compute.status()), HasSubstr("key 'model.compute'"));
  EXPECT_THAT(msg(compute.status()), HasSubstr("expected one of: auto, bf16, f32; got 'fp8'"));
}

// #16: `[model] compute` picks the GEMM path of bf16 weights; "auto" by default, with a preset
// too.
TEST(Topology, ModelComputeKey) {
  absl::StatusOr<topology::Topology> plain = parse("[model]\ndtype = \"bf16\"\n");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->model.compute, "auto");
  absl::StatusOr<topology::Topology> forced =
      parse("[model]\ndtype = \"bf16\"\ncompute = \"f32\"\n");
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_EQ(forced->model.compute, "f32");
  absl::StatusOr<topology::Topology> preset =
      parse("backend = \"sim\"\n[model]\npreset = \"mixtral-8x7b\"\ncompute = \"bf16\"\n");
  ASSERT_TRUE(preset.ok()) << preset.status();
  EXPECT_EQ(preset->model.compute, "bf16");
  // With a model folder too (the shipped bf16 model).
  const std::string models = std::string(MUFLOW_SOURCE_DIR) + "/models/kjv-mixtral-tiny-bf16";
  absl::StatusOr<topology::Topology> folder =
      parse("[model]\npath = \"" + models + "\"\ncompute = \"f32\"\n");
  ASSERT_TRUE(folder.ok()) << folder.status();
  EXPECT_EQ(folder->model.compute, "f32");
}

// #16: `[cluster] threads_per_device` (0 = auto) and `[model] gemm`.
TEST(Topology, ThreadsPerDeviceAndGemmKeys) {
  absl::StatusOr<topology::Topology> plain = parse("[cluster]\nnum_devices = 2\n");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->threads_per_device, 0);
  EXPECT_EQ(plain->model.gemm, "auto");
  EXPECT_EQ(topology::resolve_threads_per_device(*plain, 8), 4);
  EXPECT_EQ(topology::resolve_threads_per_device(*plain, 3), 1);
  EXPECT_EQ(topology::resolve_threads_per_device(*plain, 0), 1);  // unknown: 1
  absl::StatusOr<topology::Topology> three = parse(
      "[cluster]\nnum_devices = 2\nthreads_per_device = 3\n[model]\ngemm = \"onednn-tiles\"\n");
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(three->threads_per_device, 3);
  EXPECT_EQ(topology::resolve_threads_per_device(*three, 64), 3);
  EXPECT_EQ(three->model.gemm, "onednn-tiles");
  for (const char* bad : {"-1", "257", "\"two\""}) {
    absl::StatusOr<topology::Topology> t =
        parse(std::string("[cluster]\nthreads_per_device = ") + bad + "\n");
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_THAT(msg(t.status()), HasSubstr("key 'cluster.threads_per_device'")) << bad;
  }
  absl::StatusOr<topology::Topology> gemm = parse("[model]\ngemm = \"mkl\"\n");
  ASSERT_FALSE(gemm.ok());
  EXPECT_THAT(msg(gemm.status()),
              HasSubstr("expected one of: auto, fixed-order, onednn-tiles; got 'mkl'"));
}

TEST(Topology, ClusterDevicesList) {
  absl::StatusOr<topology::Topology> dup =
      parse("[[cluster.devices]]\nname = \"a\"\n[[cluster.devices]]\nname = \"a\"\n");
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(msg(dup.status()),
              HasSubstr("topo.toml:4: key 'cluster.devices[1].name': duplicate device name 'a'"));
  absl::StatusOr<topology::Topology> both =
      parse("[cluster]\nnum_devices = 2\n[[cluster.devices]]\n");
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(msg(both.status()), HasSubstr("not both"));
  absl::StatusOr<topology::Topology> gpu = parse("[[cluster.devices]]\nkind = \"H100\"\n");
  ASSERT_FALSE(gpu.ok());
  EXPECT_THAT(msg(gpu.status()), HasSubstr("backend 'cpu' runs devices of kind 'cpu'"));
}

// #15: sizes read from the file are bounded before anything is sized by them; the error names
// the file, line and key and says the bound.
TEST(Topology, SizesAreBoundedBeforeAnythingIsAllocated) {
  struct Case {
    std::string text, expect;
  };
  const std::vector<Case> cases = {
      {"[cluster]\nnum_devices = 1000000000\n",
       "topo.toml:2: key 'cluster.num_devices': expected a positive integer up to 4096, got "
       "1000000000"},
      {"[model]\nvocab = 1000000000\nhidden = 64\nlayers = 2\nheads = 4\nkv_heads = 2\n"
       "experts = 4\ntopk = 2\nffn = 64\n",
       "key 'model.vocab': expected an integer >= 4 up to 4194304, got 1000000000"},
      {"[model]\nvocab = 512\nhidden = 1000000\nlayers = 2\nheads = 4\nkv_heads = 2\n"
       "experts = 4\ntopk = 2\nffn = 64\n",
       "key 'model.hidden': expected a positive integer up to 65536, got 1000000"},
      {"[model]\nvocab = 512\nhidden = 64\nlayers = 1000000\nheads = 4\nkv_heads = 2\n"
       "experts = 4\ntopk = 2\nffn = 64\n",
       "key 'model.layers': expected a positive integer up to 1024, got 1000000"},
      {"[model]\nvocab = 512\nhidden = 64\nlayers = 2\nheads = 4\nkv_heads = 2\n"
       "experts = 1000000\ntopk = 2\nffn = 64\n",
       "key 'model.experts': expected a positive integer up to 4096, got 1000000"},
      {"[workload]\nkind = \"poisson\"\nnum_requests = 1000000000000\n",
       "key 'workload.num_requests': expected a positive integer up to 10000000, got "
       "1000000000000"},
      {"[workload]\nkind = \"poisson\"\ninput = [1000000000000, 1000000000000]\n",
       "key 'workload.input': expected [min, max] with positive integers and min <= max up to "
       "16777216, got 1000000000000"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<topology::Topology> topo = parse(c.text);
    ASSERT_FALSE(topo.ok()) << c.text;
    EXPECT_THAT(msg(topo.status()), HasSubstr(c.expect)) << c.text;
  }
  // A rate so low that the arrivals would leave the engine's time range names the key.
  absl::StatusOr<topology::Topology> slow =
      parse("[workload]\nkind = \"poisson\"\nnum_requests = 4\nrate = 1e-9\n");
  ASSERT_FALSE(slow.ok());
  EXPECT_THAT(msg(slow.status()),
              HasSubstr("topo.toml:4: key 'workload.rate': expected at least 4e-06 requests per "
                        "second for 4 requests"));
  // At the bound itself the file parses.
  EXPECT_TRUE(parse("[cluster]\nnum_devices = 4096\n").ok());
}

TEST(Topology, IdPromptsCheckedAgainstSyntheticVocab) {
  absl::StatusOr<topology::Topology> topo =
      parse("[workload]\nkind = \"ids\"\nprompts = [[1, 2], [3, 600]]\n");
  ASSERT_FALSE(topo.ok());
  EXPECT_THAT(msg(topo.status()),
              HasSubstr("topo.toml:3: key 'workload.prompts': prompt 1 position 1: token id "
                        "600 is outside [0, 512)"));
}

TEST(Topology, SamplingRanges) {
  absl::StatusOr<topology::Topology> topo = parse("[sampling]\ntop_p = 1.5\n");
  ASSERT_FALSE(topo.ok());
  EXPECT_THAT(msg(topo.status()),
              HasSubstr("topo.toml:2: key 'sampling.top_p': expected a number in (0, 1], got 1.5"));
  absl::StatusOr<topology::Topology> ok = parse("[sampling]\ntemperature = 1\nseed = 42\n");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_DOUBLE_EQ(ok->sampling.temperature, 1.0);
  EXPECT_EQ(ok->sampling.seed, 42u);
}

TEST(Topology, CheckAgainstLoadedModel) {
  topology::Topology t = topology::synthetic_demo_topology();
  t.placement = "explicit";
  t.expert_device = {0, 1, 2, 3};
  model::ModelConfig c = topology::default_synthetic_config();
  absl::Status s = topology::check_topology_against_model(t, c);
  EXPECT_THAT(msg(s), HasSubstr("lists 4 devices; the model has 8 experts"));
  t.placement = "round-robin";
  t.expert_device.clear();
  c.vocab_size = 10;
  EXPECT_THAT(msg(topology::check_topology_against_model(t, c)),
              HasSubstr("outside the model's vocabulary [0, 10)"));
}

}  // namespace
}  // namespace muflow::engine
