// Simulation speed of the sim backend: token-layer events (one token passing one MoE block)
// per wall second, with the real actors in virtual time (issue target: >= 1M per core).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "actors/server.hpp"
#include "engine/model/model_presets.hpp"

namespace {

using muflow::engine::serving::Request;
using muflow::engine::topology::Topology;

Topology topology(int num_devices, const std::string& preset) {
  Topology t;
  t.source = "<sim bench>";
  t.backend = "sim";
  for (int d = 0; d < num_devices; ++d) {
    t.devices.push_back({"h" + std::to_string(d), "H100-SXM", "node" + std::to_string(d / 8)});
  }
  t.model.synthetic = *muflow::engine::model::model_preset(preset);
  t.model.preset = preset;
  t.model.dtype = "bf16";
  t.router.kind = "exponential";
  t.sampling.stop_at_eos = false;
  t.scheduler.max_batch_requests = 256;
  t.scheduler.max_prefill_tokens = 4096;
  return t;
}

// A closed batch on `preset`: range(0) devices, range(1) requests of `prompt` prompt tokens and
// `output` new tokens.
void run_closed_batch(benchmark::State& state, const std::string& preset, int prompt, int output) {
  const int num_devices = static_cast<int>(state.range(0));
  const int num_requests = static_cast<int>(state.range(1));
  Topology t = topology(num_devices, preset);
  auto server = muflow::actors::Server::create(t);
  if (!server.ok()) {
    state.SkipWithError(std::string(server.status().message()).c_str());
    return;
  }
  std::vector<Request> requests;
  for (int i = 0; i < num_requests; ++i) {
    Request r;
    r.id = i;
    r.max_new_tokens = output;
    r.prompt.assign(prompt, 5);
    requests.push_back(r);
  }
  const int64_t layers = (*server)->config().num_layers;
  int64_t events = 0;
  for (auto _ : state) {
    auto out = (*server)->run(requests);
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      return;
    }
    // Every prompt token and every fed-back generated token passes every block.
    events += static_cast<int64_t>(num_requests) * (prompt + output - 1) * layers;
  }
  state.counters["token_layer_events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
void BM_SimTokenLayerEvents(benchmark::State& state) {
  run_closed_batch(state, "mixtral-8x7b", 64, 32);
}
BENCHMARK(BM_SimTokenLayerEvents)
    ->Args({8, 64})
    ->Args({8, 256})
    ->Args({64, 256})
    ->Args({256, 512})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// DeepSeek-V3's shape (256 experts top-8, 61 layers): every token-layer event is 8 routed rows.
void BM_SimDeepSeekV3(benchmark::State& state) { run_closed_batch(state, "deepseek-v3", 64, 16); }
BENCHMARK(BM_SimDeepSeekV3)
    ->Args({256, 256})
    ->Args({1024, 1024})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
