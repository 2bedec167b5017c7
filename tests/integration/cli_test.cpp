// The `muflow` binary end to end: outputs, trace and the error messages a user sees for bad
// input (malformed TOML, corrupt model folders), asserted on the real process.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/topology/topology.hpp"
#include "nlohmann/json.hpp"
#include "scratch_path.hpp"

namespace {

namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line, stdout and stderr together.
Result run_muflow_cmd(const std::string& command) {
  const std::string cmd = "(" + command + ") 2>&1";
  Result r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

Result run_muflow(const std::string& args) {
  return run_muflow_cmd(std::string(MUFLOW_BINARY) + " " + args);
}

fs::path scratch(const std::string& name) {
  fs::path p = muflow::testing::scratch_path("cli_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

void write_file(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

// `muflow ARGS` run from the folder `cwd` with MUFLOW_MODELS_DIR set to `models_dir` (unset
// when empty).
Result run_muflow_in(const fs::path& cwd, const std::string& models_dir, const std::string& args) {
  const std::string env = models_dir.empty() ? "env -u MUFLOW_MODELS_DIR "
                                             : "env MUFLOW_MODELS_DIR='" + models_dir + "' ";
  return run_muflow_cmd("cd '" + cwd.string() + "' && " + env + MUFLOW_BINARY + " " + args);
}

const std::string kShippedModel = std::string(MUFLOW_SOURCE_DIR) + "/models/kjv-mixtral-tiny-bf16";

// `muflow run` with no argument serves the shipped KJV model: it prints the metrics table and,
// for each built-in prompt, the prompt and the text it generated, which is what `muflow
// generate` gives for that prompt alone (greedy; the wiring, device count and batching change
// speed, never the tokens). The trace lands in out/ of the working folder.
TEST(Cli, DefaultRunPrintsTheGeneratedTextOfTheShippedModel) {
  const fs::path dir = scratch("default");
  Result r = run_muflow_in(dir, "", "run");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t num_prompts = muflow::engine::topology::kDefaultPrompts.size();
  EXPECT_NE(r.output.find("requests completed       " + std::to_string(num_prompts) + " / " +
                          std::to_string(num_prompts)),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("<embedded default>: wiring sync, backend cpu, 2 devices"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(fs::is_regular_file(dir / "out" / "muflow-trace.json"));
  for (size_t i = 0; i < num_prompts; ++i) {
    const std::string prompt(muflow::engine::topology::kDefaultPrompts[i]);
    Result g = run_muflow("generate --json --model " + kShippedModel + " --prompt '" + prompt +
                          "' --max-new-tokens " +
                          std::to_string(muflow::engine::topology::kDefaultMaxNewTokens));
    ASSERT_EQ(g.exit_code, 0) << g.output;
    const std::string text = nlohmann::json::parse(g.output).at("text").get<std::string>();
    EXPECT_FALSE(text.empty()) << prompt;
    const std::string expected =
        "[" + std::to_string(i) + "] " + prompt + "\n -> " + text + "\n";
    EXPECT_NE(r.output.find(expected), std::string::npos)
        << "expected\n" << expected << "in\n" << r.output;
  }

  // --outputs: the same texts, one JSON line per request.
  const fs::path outputs = dir / "out.jsonl";
  r = run_muflow_in(dir, "", "run --quiet --no-trace --outputs " + outputs.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(outputs);
  std::string line;
  size_t num_lines = 0;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    const int64_t id = j.at("request_id").get<int64_t>();
    ASSERT_GE(id, 0);
    ASSERT_LT(id, static_cast<int64_t>(num_prompts));
    EXPECT_EQ(j.at("prompt_text"), std::string(muflow::engine::topology::kDefaultPrompts[id]));
    EXPECT_FALSE(j.at("output_text").get<std::string>().empty()) << line;
    const std::string reason = j.at("finish_reason");
    EXPECT_TRUE(reason == "eos" || reason == "length") << line;
    EXPECT_LE(j.at("output_ids").size(),
              static_cast<size_t>(muflow::engine::topology::kDefaultMaxNewTokens));
    ++num_lines;
  }
  EXPECT_EQ(num_lines, num_prompts);
}

// MUFLOW_MODELS_DIR pointing at a folder without the model: `muflow run` says so, naming the
// variable, the folder it looked for and the model-free alternative; --synthetic still runs.
TEST(Cli, DefaultRunWithoutItsModelSaysWhereItLooked) {
  const fs::path dir = scratch("no_models");
  const fs::path empty = dir / "empty-models";
  fs::create_directories(empty);
  Result r = run_muflow_in(dir, empty.string(), "run");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("MUFLOW_MODELS_DIR='" + empty.string() + "'"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find((empty / "kjv-mixtral-tiny-bf16").string()), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("muflow run --synthetic"), std::string::npos) << r.output;

  r = run_muflow_in(dir, empty.string(), "run --synthetic --no-trace");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("requests completed       6 / 6"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("request 0 -> "), std::string::npos) << r.output;  // token ids

  // A topology file and --synthetic together is a usage error.
  r = run_muflow("run --synthetic " + std::string(MUFLOW_SOURCE_DIR) +
                 "/topologies/sync-qwen2moe-2cpu.toml");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

// The synthetic demo (`muflow run --synthetic`: 4 devices, 6 token-id prompts, 16 new tokens).
TEST(Cli, SyntheticRunPrintsMetricsWritesTraceAndOutputs) {
  const fs::path dir = scratch("synthetic");
  const fs::path trace = dir / "trace.json", outputs = dir / "out.jsonl";
  Result r = run_muflow("run --synthetic --quiet --trace " + trace.string() + " --outputs " +
                        outputs.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("requests completed       6 / 6"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("output throughput"), std::string::npos);
  EXPECT_NE(r.output.find("inter-token latency"), std::string::npos);

  // One JSON line per request with the prompt and the generated ids.
  std::ifstream in(outputs);
  std::string line;
  std::set<int64_t> ids;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line);
    ids.insert(j.at("request_id").get<int64_t>());
    EXPECT_FALSE(j.at("prompt_ids").empty());
    EXPECT_EQ(j.at("output_ids").size(), 16u) << line;  // default max_new_tokens
    EXPECT_EQ(j.at("finish_reason"), "length") << line;
  }
  EXPECT_EQ(ids, (std::set<int64_t>{0, 1, 2, 3, 4, 5}));

  // Chrome trace: a process per device, X slices of every stage kind with pid = device.
  std::ifstream tf(trace);
  nlohmann::json t = nlohmann::json::parse(tf);
  std::set<int64_t> pids, named_pids, wait_pids;
  std::set<std::string> kinds, counters;
  std::map<uint64_t, int> flow_ends;  // id → +1 for 's', +2 for 'f'
  int admits = 0, finishes = 0;
  for (const auto& e : t.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "M" && e.at("name") == "process_name") named_pids.insert(e.at("pid").get<int64_t>());
    if (ph == "C") counters.insert(e.at("name").get<std::string>().substr(0, 5));
    if (ph == "s") flow_ends[e.at("id").get<uint64_t>()] += 1;
    if (ph == "f") flow_ends[e.at("id").get<uint64_t>()] += 2;
    if (ph == "i" && e.at("name") == "admit") ++admits;
    if (ph == "i" && e.at("name") == "finish") ++finishes;
    if (ph == "X" && e.value("cat", "") == "wait") {
      EXPECT_EQ(e.at("tid").get<int64_t>(), 10000);
      wait_pids.insert(e.at("pid").get<int64_t>());
      continue;
    }
    if (ph != "X") continue;
    pids.insert(e.at("pid").get<int64_t>());
    EXPECT_GE(e.at("dur").get<double>(), 0.0);
    const std::string name = e.at("name");
    kinds.insert(name.substr(0, name.find(' ')));
    EXPECT_GT(e.at("args").at("tokens").get<int64_t>(), 0) << e.dump();
    EXPECT_GE(e.at("args").at("tokens").get<int64_t>(), e.at("args").at("requests").get<int64_t>());
    EXPECT_GE(e.at("args").at("requests").get<int64_t>(), 1) << e.dump();
  }
  EXPECT_EQ(pids, (std::set<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(named_pids, pids);
  EXPECT_EQ(kinds, (std::set<std::string>{"attn", "expert", "sampler"}));
  // Every device waits in collectives under sync; μ-queue depth, busy state and KV counters;
  // every flow has both ends; one admission and one completion per request.
  EXPECT_EQ(wait_pids, pids);
  EXPECT_EQ(counters, (std::set<std::string>{"queue", "busy", "kv ca"}));
  ASSERT_FALSE(flow_ends.empty());
  for (const auto& [id, ends] : flow_ends) EXPECT_EQ(ends, 3) << "flow " << id;
  EXPECT_EQ(admits, 6);
  EXPECT_EQ(finishes, 6);
  EXPECT_EQ(t.at("otherData").at("metrics").at("num_completed_requests"), 6);
  EXPECT_EQ(t.at("otherData").at("num_devices"), 4);
}

// Round trip: what `muflow trace summary` computes from the trace's events equals what the run's
// metrics reported (busy % per device over the run's duration).
TEST(Cli, TraceSummaryAgreesWithRunMetrics) {
  const fs::path dir = scratch("summary");
  const fs::path trace = dir / "trace.json";
  Result r = run_muflow("run --synthetic --quiet --trace " + trace.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_muflow("trace summary --json " + trace.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json report = nlohmann::json::parse(r.output);
  std::ifstream tf(trace);
  const nlohmann::json t = nlohmann::json::parse(tf);
  const auto& run_busy = t.at("otherData").at("metrics").at("device_busy_pct");
  ASSERT_EQ(report.at("devices").size(), run_busy.size());
  for (size_t d = 0; d < run_busy.size(); ++d) {
    const auto& dev = report.at("devices")[d];
    EXPECT_NEAR(dev.at("run_busy_pct").get<double>(), run_busy[d].get<double>(),
                1e-6 * std::max(1.0, run_busy[d].get<double>()))
        << "device " << d;
    EXPECT_NEAR(dev.at("busy_pct").get<double>() + dev.at("wait_pct").get<double>() +
                    dev.at("idle_pct").get<double>(),
                100.0, 1e-6);
    EXPECT_GT(dev.at("wait_pct").get<double>(), 0.0);  // sync waits at every barrier
  }
  // The heatmap counts every expert token the run computed: top-k rows of every token that
  // passed a block; the balance table covers every block.
  EXPECT_EQ(report.at("heatmap").at("num_blocks"), 4);
  EXPECT_EQ(report.at("balance").size(), 4u);
  r = run_muflow("trace summary " + trace.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("waiting in collectives"), std::string::npos) << r.output;

  r = run_muflow("trace summary " + (dir / "nope.json").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("nope.json"), std::string::npos) << r.output;
}

// `muflow bench` on the sim backend: one row per sweep value in the table and the CSV; under
// sync EP, skewing 90% of the tokens onto GPU 0's experts must cost throughput.
TEST(Cli, BenchSweepsSkewOnTheSimBackend) {
  const fs::path dir = scratch("bench");
  const std::string topo = std::string(MUFLOW_SOURCE_DIR) +
                           "/topologies/sim-harmoeny-switch128-8xv100.toml";
  const fs::path csv = dir / "bench.csv";
  Result r = run_muflow("bench " + topo + " --sweep router.skew=0,0.9 --csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("router.skew"), std::string::npos) << r.output;
  std::ifstream f(csv);
  std::string header, line;
  std::getline(f, header);
  EXPECT_EQ(header.rfind("wiring,router.skew,tok/s,", 0), 0u) << header;
  std::vector<double> tokens_per_s;
  while (std::getline(f, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    ASSERT_GE(cells.size(), 3u) << line;
    EXPECT_EQ(cells[0], "sync");
    tokens_per_s.push_back(std::stod(cells[2]));
  }
  ASSERT_EQ(tokens_per_s.size(), 2u);
  EXPECT_GT(tokens_per_s[0], 1.5 * tokens_per_s[1]) << "skew 0 vs 0.9";

  r = run_muflow("bench " + topo + " --sweep router.skw=0.1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("unknown key 'router.skw'"), std::string::npos) << r.output;
  r = run_muflow("bench " + topo + " --sweep router.skew=2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("router.skew=2"), std::string::npos) << r.output;
}

// Number after `label` on the first line that contains both `row` and `label`; -1 if none.
double number_after(const std::string& text, const std::string& row, const std::string& label) {
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) {
    if (line.rfind(row, 0) != 0) continue;
    const size_t at = line.find(label);
    if (at == std::string::npos) continue;
    return std::stod(line.substr(at + label.size()));
  }
  return -1;
}

// `muflow plan` on the real per-rank Switch-8 traffic: every order is at or above b_max and
// Aurora's reaches it (within 1%: the unsplit order may miss it on a block); bad options are
// clear errors.
TEST(Cli, PlanOrdersAllToAllsOnRealPerRankTraffic) {
  const std::string traffic =
      std::string(MUFLOW_DATA_DIR) + "/routing/switch-base-per-rank-bookcorpus.csv";
  if (!fs::exists(traffic)) GTEST_SKIP() << "no trace at " << traffic;
  const std::string topo =
      std::string(MUFLOW_SOURCE_DIR) + "/topologies/sim-aurora-switch8-8gpu-100g.toml";
  Result r = run_muflow("plan " + topo + " --traffic " + traffic + " --iteration 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::map<std::string, double> ratio;
  for (const char* order : {"row_major", "random", "sjf", "aurora_unsplit", "aurora_chunked"}) {
    const std::string key = std::string(order) + ": ";
    const size_t at = r.output.find(key, r.output.find("\nrow_major: "));
    ASSERT_NE(at, std::string::npos) << order << "\n" << r.output;
    ratio[order] = std::stod(r.output.substr(at + key.size()));
    EXPECT_GE(ratio[order], 1.0) << order;
  }
  const size_t at = r.output.find(", aurora: ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const double aurora = std::stod(r.output.substr(at + 10));
  EXPECT_GE(aurora, 1.0);
  EXPECT_LE(aurora, 1.01);
  EXPECT_LE(aurora, std::min(ratio["aurora_unsplit"], ratio["aurora_chunked"]));
  EXPECT_LT(aurora, ratio["sjf"]);
  EXPECT_LT(aurora, ratio["row_major"]);

  r = run_muflow("plan " + topo + " --traffic " + traffic + " --iteration 99");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("iteration 99 out of range"), std::string::npos) << r.output;
  r = run_muflow("plan " + topo + " --method simplex");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

// ExFlow affinity placement on paths recorded from the trained KJV model: fewer cross-device
// hops than round robin, on the recorded paths and held-out ones.
TEST(Cli, PlanAffinityPlacementCutsHopsOnRecordedPaths) {
  const std::string model = std::string(MUFLOW_DATA_DIR) + "/models/kjv-mixtral-tiny";
  if (!fs::exists(model + "/config.json")) GTEST_SKIP() << "no model at " << model;
  const fs::path dir = scratch("plan_affinity");
  const std::string topo = std::string(MUFLOW_SOURCE_DIR) + "/topologies/sync-kjv-4cpu.toml";
  const fs::path paths = dir / "routing.csv";
  Result r = run_muflow("run " + topo + " --no-trace --quiet --record-routing " + paths.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_muflow("plan " + topo + " --routing " + paths.string() + " --evaluate " +
                 paths.string() + " --time-limit 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const double rr = number_after(r.output, "round-robin", "cross-device hops");
  const double heuristic = number_after(r.output, "heuristic", "cross-device hops");
  const double milp = number_after(r.output, "milp", "cross-device hops");
  ASSERT_GT(rr, 0) << r.output;
  EXPECT_GT(heuristic, 0) << r.output;
  EXPECT_LT(heuristic, 0.8 * rr) << r.output;
  EXPECT_LE(milp, heuristic) << r.output;
  EXPECT_NE(r.output.find("held-out paths"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("block 3 expert_device = ["), std::string::npos) << r.output;

  write_file(dir / "bad.csv", "request_id,position,block,experts,weights\n0,0,9,1 2,0.5 0.5\n");
  r = run_muflow("plan " + topo + " --routing " + (dir / "bad.csv").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("bad.csv"), std::string::npos) << r.output;
}

TEST(Cli, MalformedTopologyNamesFileLineAndKey) {
  const fs::path dir = scratch("toml");
  write_file(dir / "syntax.toml", "wiring = \"sync\"\nbackend = \"cpu\"\n[cluster\nnum_devices = 2\n");
  Result r = run_muflow("run " + (dir / "syntax.toml").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("syntax.toml:3"), std::string::npos) << r.output;

  write_file(dir / "typo.toml", "wiring = \"sync\"\n\n[cluster]\nnum_devices = 2\nnum_devcies = 3\n");
  r = run_muflow("run " + (dir / "typo.toml").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("typo.toml:5"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("num_devcies"), std::string::npos) << r.output;

  write_file(dir / "wiring.toml", "wiring = \"warp\"\n");
  r = run_muflow("run " + (dir / "wiring.toml").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("wiring.toml:1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("sync"), std::string::npos) << r.output;  // lists what is allowed

  r = run_muflow("run " + (dir / "missing.toml").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("missing.toml"), std::string::npos) << r.output;
}

// A failed command says which command failed: its message starts with "muflow COMMAND: " on a
// line of its own, and the exit code is 1.
TEST(Cli, EachCommandsErrorStartsWithTheCommandsName) {
  const fs::path dir = scratch("command_errors");
  const std::string missing = (dir / "missing.toml").string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"run " + missing, "muflow run: "},
      {"serve " + missing, "muflow serve: "},
      {"bench " + missing, "muflow bench: "},
      {"generate --model " + (dir / "no-model").string(), "muflow generate: "},
      {"trace view " + (dir / "missing.json").string() + " -o " + (dir / "r.html").string(),
       "muflow trace view: "},
  };
  for (const auto& [args, prefix] : cases) {
    const Result r = run_muflow(args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    const size_t at = r.output.find(prefix);
    EXPECT_NE(at, std::string::npos) << args << "\n" << r.output;
    EXPECT_TRUE(at == 0 || at == std::string::npos || r.output[at - 1] == '\n') << args << "\n"
                                                                                << r.output;
  }
}

TEST(Cli, CorruptModelFolderNamesFileAndTensor) {
  const fs::path dir = scratch("model");
  Result r = run_muflow("make-model --out " + dir.string() +
                        " --vocab 64 --hidden 32 --layers 2 --heads 4 --kv-heads 2 --experts 4"
                        " --topk 2 --ffn 48 --seed 5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_muflow("generate --model " + dir.string() + " --prompt-ids 1,5,9 --max-new-tokens 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // Prompt text on a model without tokenizer.model.
  r = run_muflow("generate --model " + dir.string() + " --prompt hello");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("no tokenizer.model"), std::string::npos) << r.output;

  // Token id outside the vocabulary.
  r = run_muflow("generate --model " + dir.string() + " --prompt-ids 1,64");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("outside the vocabulary [0, 64)"), std::string::npos) << r.output;

  // #15: sampling options outside their interval (NaN included) are refused with the
  // interval as written.
  r = run_muflow("generate --model " + dir.string() + " --prompt-ids 1,2 --temperature nan");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("expected a number in [0, 100], got nan"), std::string::npos) << r.output;
  r = run_muflow("generate --model " + dir.string() + " --prompt-ids 1,2 --top-p 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("expected a number in (0, 1], got 0"), std::string::npos) << r.output;

  // Truncated weights: the error names the file.
  const fs::path st = dir / "model.safetensors";
  fs::resize_file(st, fs::file_size(st) / 2);
  r = run_muflow("generate --model " + dir.string() + " --prompt-ids 1,2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("model.safetensors"), std::string::npos) << r.output;

  // Bad config.json.
  write_file(dir / "config.json", "{\"model_type\": \"llama\"}");
  r = run_muflow("generate --model " + dir.string() + " --prompt-ids 1,2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("config.json"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("llama"), std::string::npos) << r.output;
}

TEST(Cli, GenerateWritesPromptLogitsAsNpy) {
  const fs::path dir = scratch("npy");
  Result r = run_muflow("make-model --out " + dir.string() +
                        " --type qwen2_moe --vocab 50 --hidden 32 --layers 2 --heads 4"
                        " --kv-heads 4 --experts 4 --topk 2 --ffn 40 --shared-ffn 24 --seed 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path npy = dir / "sub" / "logits.npy";
  r = run_muflow("generate --model " + dir.string() +
                 " --prompt-ids 1,7,8,9,10 --max-new-tokens 2 --devices 2 --json --logits-out " +
                 npy.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j.at("prompt_ids").size(), 5u);
  EXPECT_EQ(j.at("output_ids").size(), 2u);
  std::ifstream f(npy, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  EXPECT_NE(bytes.find("'shape': (5, 50)"), std::string::npos);
  const size_t header = 10 + static_cast<unsigned char>(bytes[8]) +
                        256 * static_cast<unsigned char>(bytes[9]);
  EXPECT_EQ(bytes.size() - header, 5u * 50u * sizeof(float));
}

// --outputs is written by a thread of its own; a write that fails mid-run (a full disk:
// /dev/full accepts the open and fails every write) still ends the run with exit 1 and the
// OS reason, after the metrics.
TEST(Cli, RunReportsAnOutputsFileThatFillsUp) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  Result r = run_muflow("run --synthetic --quiet --no-trace --outputs /dev/full");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("failed writing --outputs file '/dev/full'"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("requests completed"), std::string::npos) << r.output;
}

// Issue #15: every output path is checked before any work. A path under a regular file cannot
// be created (even as root): the run fails at once, exit 1, naming the path and the OS reason,
// before the model loads.
TEST(Cli, RunFailsFastOnAnUnwritableOutputPath) {
  const fs::path dir = scratch("unwritable");
  write_file(dir / "plain", "a file, not a folder\n");
  const std::string bad = (dir / "plain" / "sub").string();
  for (const std::string flag : {"--outputs", "--trace", "--record-routing"}) {
    const auto t0 = std::chrono::steady_clock::now();
    Result r = run_muflow("run --synthetic " + flag + " " + bad + "/f.out");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.exit_code, 1) << flag << ": " << r.output;
    EXPECT_NE(r.output.find(bad + "/f.out"), std::string::npos) << flag << ": " << r.output;
    EXPECT_NE(r.output.find("Not a directory"), std::string::npos) << flag << ": " << r.output;
    EXPECT_EQ(r.output.find("loading model"), std::string::npos) << flag << ": " << r.output;
    EXPECT_LT(s, 5.0) << flag;
  }
  // A folder where the file should be: the OS reason is in the message.
  fs::create_directories(dir / "is_a_dir");
  Result r = run_muflow("run --synthetic --no-trace --outputs " + (dir / "is_a_dir").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("Is a directory"), std::string::npos) << r.output;
  // The trace's check leaves no file behind when the run then fails (here on the routing
  // record's path, checked after it).
  const fs::path probed = dir / "probe" / "t.json";
  r = run_muflow("run --synthetic --quiet --trace " + probed.string() + " --record-routing " +
                 bad + "/r.csv");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_FALSE(fs::exists(probed));
}

// A `muflow run` started in the background with stdout and stderr to `log`; `args` are its
// arguments after the binary.
pid_t spawn_muflow(const std::vector<std::string>& args, const fs::path& log) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
  }
  std::vector<std::string> argv_s{MUFLOW_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(MUFLOW_BINARY, argv.data());
  _exit(127);
}

size_t count_lines(const fs::path& p) {
  std::ifstream in(p);
  size_t n = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) ++n;
  }
  return n;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A topology with `num_requests` Poisson requests arriving fast: a run far longer than a test,
// whose first requests finish within a second.
std::string long_topology(const std::string& backend) {
  if (backend == "sim") {
    return "wiring = \"sync\"\nbackend = \"sim\"\n[cluster]\nnum_devices = 8\nkind = \"H100-SXM\"\n"
           "[model]\npreset = \"mixtral-8x7b\"\ndtype = \"bf16\"\n"
           "[workload]\nkind = \"poisson\"\nnum_requests = 50000\nrate = 200.0\n"
           "input = [50, 150]\noutput = [4, 8]\nseed = 1\n[sampling]\nstop_at_eos = false\n";
  }
  return "wiring = \"sync\"\nbackend = \"cpu\"\n"
         "[[cluster.devices]]\nname = \"cpu0\"\n[[cluster.devices]]\nname = \"cpu1\"\n"
         "[model]\ntype = \"mixtral\"\nvocab = 512\nhidden = 128\nlayers = 2\nheads = 4\n"
         "kv_heads = 2\nhead_dim = 32\nexperts = 4\ntopk = 2\nffn = 256\nseed = 7\n"
         "dtype = \"f32\"\n[workload]\nkind = \"poisson\"\nnum_requests = 20000\n"
         "rate = 2000.0\ninput = [8, 16]\noutput = [4, 8]\nseed = 1\n"
         "[sampling]\nstop_at_eos = false\n";
}

// Issue #15: SIGINT (cpu backend) and SIGTERM (sim backend) stop a long run cleanly: the
// requests that finished are in --outputs already (one valid JSON line each, with its
// finish_reason), the unfinished ones are cancelled and get a "cancelled" line, the metrics
// so far are printed, the trace of what ran is written, and the exit code is 128 + signal.
TEST(Cli, RunStopsCleanlyOnSigintAndSigterm) {
  for (const auto& [backend, sig] : {std::pair<std::string, int>{"cpu", SIGINT},
                                     std::pair<std::string, int>{"sim", SIGTERM}}) {
    SCOPED_TRACE(backend);
    const fs::path dir = scratch("signal_" + backend);
    write_file(dir / "long.toml", long_topology(backend));
    const fs::path outputs = dir / "out.jsonl", trace = dir / "t" / "trace.json";
    const pid_t pid =
        spawn_muflow({"run", (dir / "long.toml").string(), "--outputs", outputs.string(),
                      "--trace", trace.string()},
                     dir / "log.txt");
    ASSERT_GT(pid, 0);
    // Wait until a few requests finished (their lines are written as they finish).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (count_lines(outputs) < 3 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const size_t lines_before = count_lines(outputs);
    EXPECT_GE(lines_before, 3u) << read_text(dir / "log.txt");
    kill(pid, sig);
    int status = 0;
    // A bound, not a timing: the stop writes the trace of what ran (a hang never ends). Under
    // ASan on the 2-core AVX2-only VM that took 53 s for the 107 MB sim trace of requests of
    // 50–250 output tokens, 35 s for 77 MB; with 4–8 the sim trace is about 6 MB.
    const auto stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    pid_t done = 0;
    while ((done = waitpid(pid, &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < stop_deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (done == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL() << "muflow run did not stop after the signal:\n" << read_text(dir / "log.txt");
    }
    const std::string log = read_text(dir / "log.txt");
    ASSERT_TRUE(WIFEXITED(status)) << log;
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig) << log;
    EXPECT_NE(log.find("requests completed"), std::string::npos) << log;  // metrics so far
    EXPECT_NE(log.find(sig == SIGINT ? "stopped by SIGINT" : "stopped by SIGTERM"),
              std::string::npos)
        << log;

    // Every line parses; every request has one; the finished ones came before the stop.
    std::ifstream in(outputs);
    std::string line;
    std::set<int64_t> ids;
    size_t num_done = 0, num_cancelled = 0;
    while (std::getline(in, line)) {
      const nlohmann::json j = nlohmann::json::parse(line);
      EXPECT_TRUE(ids.insert(j.at("request_id").get<int64_t>()).second) << line;
      const std::string reason = j.at("finish_reason");
      if (reason == "cancelled") {
        ++num_cancelled;
      } else {
        EXPECT_EQ(reason, "length") << line;
        ++num_done;
      }
    }
    EXPECT_GE(num_done, lines_before);
    EXPECT_GT(num_cancelled, 0u);
    EXPECT_EQ(ids.size(), num_done + num_cancelled);
    EXPECT_EQ(*ids.rbegin() + 1, static_cast<int64_t>(ids.size()));

    std::ifstream tf(trace);
    const nlohmann::json t = nlohmann::json::parse(tf);
    EXPECT_EQ(t.at("otherData").at("stopped_early"), true);
    EXPECT_GT(t.at("traceEvents").size(), 0u);
  }
}

// Issue #15: a trace that hit its event cap says so, on stderr and in its metadata, with the
// numbers and how to keep the events.
TEST(Cli, RunWarnsWhenTheTraceDroppedEvents) {
  const fs::path dir = scratch("trace_drops");
  const fs::path trace = dir / "trace.json";
  Result r = run_muflow("run --synthetic --quiet --trace-max-events 100 --trace " +
                        trace.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: the trace dropped "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("max_events = 100:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--trace-max-events"), std::string::npos) << r.output;
  std::ifstream tf(trace);
  const nlohmann::json t = nlohmann::json::parse(tf);
  const nlohmann::json& other = t.at("otherData");
  EXPECT_EQ(other.at("max_events"), 100);
  EXPECT_EQ(other.at("num_events"), 100);
  const int64_t dropped = other.at("num_dropped_events").get<int64_t>();
  EXPECT_GT(dropped, 0);
  EXPECT_NE(other.at("warning").get<std::string>().find(std::to_string(dropped)),
            std::string::npos);

  // Under the cap: no warning, no warning key.
  r = run_muflow("run --synthetic --quiet --trace " + trace.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("warning"), std::string::npos) << r.output;
  std::ifstream tf2(trace);
  EXPECT_FALSE(nlohmann::json::parse(tf2).at("otherData").contains("warning"));
}

// Into a pipe (not a terminal) the progress goes as whole lines, no carriage returns, ending
// with the finished count; on the sim it shows the simulated clock, which is the run's
// duration in the metrics at the end (a rate per wall second would be the simulator's speed).
TEST(Cli, ProgressIntoAPipeIsWholeLinesAndTheSimShowsItsClock) {
  const fs::path dir = scratch("progress");
  const fs::path topo = dir / "sim.toml";
  write_file(topo,
             "wiring = \"sync\"\nbackend = \"sim\"\n[cluster]\nnum_devices = 8\n"
             "kind = \"H100-SXM\"\n[model]\npreset = \"mixtral-8x7b\"\ndtype = \"bf16\"\n"
             "[workload]\nkind = \"poisson\"\nnum_requests = 40\nrate = 200.0\n"
             "input = [50, 150]\noutput = [4, 8]\nseed = 1\n[sampling]\nstop_at_eos = false\n");
  Result r = run_muflow("run " + topo.string() + " --no-trace");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find('\r'), std::string::npos) << r.output;
  const std::regex last(
      R"(\n  requests 40/40  tokens \d+  simulated (\d+\.\d+) s  \(wall \d+\.\d s\)\n)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, last)) << r.output;
  const std::regex duration(R"(duration\s+(\d+\.\d+) s)");
  std::smatch d;
  ASSERT_TRUE(std::regex_search(r.output, d, duration)) << r.output;
  EXPECT_NEAR(std::stod(m[1].str()), std::stod(d[1].str()), 1e-3) << r.output;
}

// `muflow run --spawn-workers` end to end (#18): the command starts the topology's loopback
// workers, serves the workload across the processes and stops them; `--max-message-mib` is the
// driver's data-plane limit and is passed to the workers it starts, so a run whose batches are
// larger fails with the reason instead of waiting for them, and the same run passes under the
// default limit.

// A synthetic model with 1,024-wide rows on 2 cpu devices, device 1 in a loopback worker; two
// 400-token prompts prefilled in one chunk each: a dispatch batch of ~800 rows is ~3 MB.
std::string wide_topology() {
  return "wiring = \"sync\"\nbackend = \"cpu\"\n[cluster]\nnum_devices = 2\n"
         "threads_per_device = 1\n[[cluster.workers]]\naddress = \"127.0.0.1:0\"\n"
         "devices = [1]\n[model]\ntype = \"mixtral\"\nvocab = 512\nhidden = 1024\nlayers = 1\n"
         "heads = 8\nkv_heads = 2\nhead_dim = 128\nexperts = 2\ntopk = 2\nffn = 256\nseed = 7\n"
         "dtype = \"f32\"\n[scheduler]\nmax_prefill_tokens = 512\nmax_batch_tokens = 1024\n"
         "[workload]\nkind = \"poisson\"\nnum_requests = 2\nrate = 1000.0\ninput = [400, 420]\n"
         "output = [2, 2]\nseed = 1\n[sampling]\nstop_at_eos = false\n";
}

TEST(CliSpawnWorkers, TheShippedTwoWorkerTopologyServesItsPrompts) {
  Result r = run_muflow(std::string("run ") + MUFLOW_SOURCE_DIR +
                        "/topologies/sync-kjv-2workers.toml --spawn-workers --quiet --no-trace");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("requests completed       8 / 8"), std::string::npos) << r.output;
}

TEST(CliSpawnWorkers, MaxMessageMibIsTheDriversAndTheWorkersLimit) {
  const fs::path dir = scratch("spawn_workers");
  const fs::path topo = dir / "wide.toml";
  write_file(topo, wide_topology());
  const Result small = run_muflow("run " + topo.string() +
                                  " --spawn-workers --quiet --no-trace --max-message-mib 1");
  EXPECT_EQ(small.exit_code, 1) << small.output;
  EXPECT_NE(small.output.find("max_message_bytes"), std::string::npos) << small.output;
  // The worker got the same limit (either side may be the one whose refusal ends the run).
  EXPECT_NE(small.output.find("joined the data plane as process 1 (messages up to 1048576 bytes)"),
            std::string::npos)
      << small.output;
  const Result fits = run_muflow("run " + topo.string() + " --spawn-workers --quiet --no-trace");
  ASSERT_EQ(fits.exit_code, 0) << fits.output;
  EXPECT_NE(fits.output.find("requests completed       2 / 2"), std::string::npos) << fits.output;
}

}  // namespace
