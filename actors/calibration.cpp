#include "actors/calibration.hpp"

#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "actors/queued_handoffs.hpp"
#include "actors/server.hpp"
#include "engine/exec/executor.hpp"
#include "engine/serving/kv_cache.hpp"
#include "engine/trace/trace.hpp"
#include "engine/trace/trace_reader.hpp"
#include "kernels/sim/host_time_table.hpp"
#include "kernels/sim/measured_kernels.hpp"
#include "nlohmann/json.hpp"

namespace muflow::actors {
namespace {

namespace fs = std::filesystem;
using engine::model::ModelConfig;
using engine::topology::Topology;
using kernels::sim::median;

/// Batch sizes measured: dense at small n (decode), geometric above.
std::vector<int64_t> token_grid(int64_t max_tokens) {
  std::vector<int64_t> out;
  for (int64_t n : {1,  2,  3,   4,   6,   8,   12,  16,  24,   32,   48,
                    64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048}) {
    if (n <= max_tokens) out.push_back(n);
  }
  return out;
}

/// The `# kind=... ` metadata line of a model (kernels/sim/measured_kernels.hpp).
std::string meta_line(const std::string& kind, const ModelConfig& c, const std::string& dtype,
                      int64_t threads, int concurrent) {
  return absl::StrFormat(
      "# kind=%s hidden=%d ffn=%d heads=%d kv_heads=%d head_dim=%d experts=%d topk=%d vocab=%d "
      "gated=%d dtype=%s threads=%d concurrent=%d\n",
      kind, c.hidden_size, c.expert_ffn, c.num_heads, c.num_kv_heads, c.head_dim, c.num_experts,
      c.num_topk, c.vocab_size, c.gated_experts ? 1 : 0, dtype, threads, concurrent);
}

/// One measuring thread's state: its own executor, KV caches and buffers.
struct Worker {
  std::shared_ptr<engine::exec::Executor> exec;
  std::vector<engine::serving::KvCache> kv;  ///< [num_layers]
  std::vector<float> x, y, h, expert_x, shared;
  std::vector<int32_t> topk_ids;
  std::vector<float> topk_weights;
  std::vector<float> flush;  ///< 64 MiB read between LM-head calls (cold weights)
  double sink = 0;
  /// The first error of an executor call (attention, KV sync): the point's time would be that
  /// of a failed call, so calibration stops with it instead of writing it.
  absl::Status error;
  void keep(const absl::Status& s) {
    if (!s.ok() && error.ok()) error = s;
  }
  int index = 0;  ///< which concurrent worker: offsets the blocks and experts it reads, so
                  ///< workers stream different weights, as different devices do in a run
  /// The next (block, expert) slot an expert point reads: one rotation over all slots across
  /// points, so a slot is read again only after every other one, as in a run.
  int64_t next_slot = 0;
};

/// What one measurement point runs: `call(worker, repeat)` times itself and returns seconds;
/// `prepare(worker, repeat)` runs before it, untimed.
struct Point {
  std::string op;
  int64_t tokens = 0, context = 0, width = 0;
  std::function<void(Worker&, int)> prepare;
  std::function<void(Worker&, int)> call;
  /// Runs once on each timing worker before the repeats, untimed: leaves the caches as a run
  /// leaves them, whatever the points before this one read.
  std::function<void(Worker&)> warm;
  bool alone = false;  ///< timed on worker 0 with the others idle (`expert_alone` rows)
};

class Measurer {
 public:
  /// `executors`: one per concurrent worker (each a device's executor of the backend).
  Measurer(ModelConfig config, std::vector<std::shared_ptr<engine::exec::Executor>> executors,
           int repeats)
      : config_(std::move(config)),
        repeats_(repeats),
        concurrent_(static_cast<int>(executors.size())) {
    const ModelConfig& c = config_;
    workers_.resize(executors.size());
    for (size_t i = 0; i < workers_.size(); ++i) {
      Worker& w = workers_[i];
      w.index = static_cast<int>(i);
      w.exec = std::move(executors[i]);
      w.kv.assign(static_cast<size_t>(c.num_layers),
                  engine::serving::KvCache(c.num_kv_heads * c.head_dim));
      w.flush.assign(size_t{16} << 20, 1.0f);
      // Worker i starts i / concurrent of the way round: workers read different experts.
      const int64_t slots = c.num_layers * c.num_experts;
      w.next_slot = slots * w.index / static_cast<int64_t>(workers_.size());
    }
  }

  /// Times `p` on every worker at once (on worker 0 alone where p.alone); returns worker 0's
  /// median seconds. Errors: the first failed executor call of any worker (Worker::error).
  absl::StatusOr<double> measure(const Point& p) {
    const int total = repeats_ + 1;  // the first call warms up and is not kept
    std::vector<double> times;
    const size_t num_workers = p.alone ? 1 : workers_.size();
    std::barrier sync(static_cast<std::ptrdiff_t>(num_workers));
    auto body = [&](size_t wi) {
      Worker& w = workers_[wi];
      if (p.warm) p.warm(w);
      for (int r = 0; r < total; ++r) {
        if (p.prepare) p.prepare(w, r);
        sync.arrive_and_wait();
        const auto t0 = std::chrono::steady_clock::now();
        p.call(w, r);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (wi == 0 && r > 0) times.push_back(s);
        sync.arrive_and_wait();
      }
    };
    std::vector<std::thread> others;
    for (size_t i = 1; i < num_workers; ++i) others.emplace_back(body, i);
    body(0);
    for (std::thread& t : others) t.join();
    for (Worker& w : workers_) {
      if (!w.error.ok()) return w.error;
    }
    return median(times);
  }

  /// The points to time up to `max_tokens` rows and `max_context` positions; `evict`: the LM
  /// head's weights are evicted before each call (cold, as a run's real model finds them after
  /// a step's other work), else left warm (the tiny model's, which stay cached in its runs).
  std::vector<Point> points(int64_t max_tokens, int64_t max_context, bool evict = true) const {
    const ModelConfig& c = config_;
    const int num_workers = concurrent_;
    const int64_t width = c.hidden_size;
    const int64_t K = c.num_topk;
    std::vector<Point> out;
    // Attention: n sequences of one new token at context ctx; (block, request ids) rotate.
    auto attention = [=](int64_t n, int64_t ctx, bool prefill) {
      Point p;
      p.op = prefill ? "prefill" : "attention";
      p.tokens = n;
      p.context = ctx;
      const int64_t seqs = prefill ? 1 : n;
      const int64_t past = prefill ? 0 : ctx - 1;  // cached positions before the new ones
      p.prepare = [=](Worker& w, int r) {
        const auto block = static_cast<size_t>((r + w.index) % c.num_layers);
        engine::serving::KvCache& kv = w.kv[block];
        for (int64_t s = 0; s < seqs; ++s) kv.release(s);
        std::vector<float> zero(static_cast<size_t>(c.num_kv_heads * c.head_dim), 0.01f);
        std::vector<int64_t> ids;
        for (int64_t s = 0; s < seqs; ++s) {
          for (int64_t pos = 0; pos < past; ++pos) kv.append(s, pos, zero.data(), zero.data());
          ids.push_back(s);
        }
        // A backend with its own copy of the cache (cuda) takes the rows now, untimed: in a
        // run they are already there.
        w.keep(w.exec->sync_kv(kv, ids));
        w.h.assign(static_cast<size_t>(n * width), 0.02f);
        w.expert_x.assign(static_cast<size_t>(n * width), 0.f);
        w.topk_ids.assign(static_cast<size_t>(n * K), 0);
        w.topk_weights.assign(static_cast<size_t>(n * K), 0.f);
        w.shared.assign(c.shared_expert_ffn > 0 ? static_cast<size_t>(n * width) : 0, 0.f);
      };
      p.call = [=](Worker& w, int r) {
        const auto block = (r + w.index) % c.num_layers;
        std::vector<engine::dataflow::TokenMeta> tokens(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
          tokens[static_cast<size_t>(i)].request_id = prefill ? 0 : i;
          tokens[static_cast<size_t>(i)].position = prefill ? i : past;
        }
        engine::exec::AttentionResult res{w.expert_x.data(), w.topk_ids.data(),
                                          w.topk_weights.data(),
                                          w.shared.empty() ? nullptr : w.shared.data()};
        double unused = 0;
        w.keep(w.exec->attention(block, w.kv[static_cast<size_t>(block)], tokens, w.h.data(), res,
                                 &unused));
      };
      return p;
    };
    const std::vector<int64_t> grid = token_grid(max_tokens);
    for (int64_t ctx :
         {int64_t{1}, int64_t{32}, int64_t{128}, int64_t{512}, int64_t{1024}, int64_t{2048}}) {
      if (ctx > max_context) continue;
      for (int64_t n : grid) {
        if (n > 128 || n * ctx > 65536) continue;  // decode batches; bounded KV fill
        out.push_back(attention(n, ctx, false));
      }
    }
    for (int64_t n : grid) {
      if (n >= 8) out.push_back(attention(n, n, true));
    }
    // Experts: each call reads the next (block, expert) slot of one rotation over all of them
    // that runs through every expert point, after an untimed pass over all before the first
    // (`warm`: the attention points read other weights), so a slot's weights are as cached as
    // in a run (read again after every other slot), whatever the cache size.
    // With several workers, each size also alone: the devices of one host share its memory
    // bandwidth.
    const int64_t slots = c.num_layers * c.num_experts;
    for (const bool alone : {false, true}) {
      if (alone && num_workers < 2) continue;
      for (int64_t n : grid) {
        Point p;
        p.op = alone ? "expert_alone" : "expert";
        p.alone = alone;
        p.tokens = n;
        p.width = c.expert_ffn;
        p.prepare = [=](Worker& w, int) {
          w.x.assign(static_cast<size_t>(n * width), 0.03f);
          w.y.assign(static_cast<size_t>(n * width), 0.f);
        };
        if (!alone && n == grid.front()) {
          p.warm = [=](Worker& w) {
            std::vector<float> x(static_cast<size_t>(width), 0.03f), y(static_cast<size_t>(width));
            for (int64_t i = 0; i < slots; ++i) {
              const int64_t slot = (w.next_slot + i) % slots;
              double unused = 0;
              w.exec->expert(slot / c.num_experts, slot % c.num_experts, x.data(), 1, y.data(),
                             &unused);
            }
          };
        }
        p.call = [=](Worker& w, int) {
          const int64_t slot = w.next_slot;
          w.next_slot = (w.next_slot + 1) % slots;
          double unused = 0;
          w.exec->expert(slot / c.num_experts, slot % c.num_experts, w.x.data(), n, w.y.data(),
                         &unused);
        };
        out.push_back(std::move(p));
      }
    }
    // LM head + sampling; a 64 MiB read before each call evicts its weights.
    for (int64_t n : grid) {
      Point p;
      p.op = "lm_head";
      p.tokens = n;
      p.prepare = [=](Worker& w, int) {
        if (evict) {
          double sum = 0;
          for (size_t i = 0; i < w.flush.size(); i += 16) sum += w.flush[i];
          w.sink += sum;
        }
        w.h.assign(static_cast<size_t>(n * width), 0.02f);
      };
      p.call = [=](Worker& w, int) {
        std::vector<engine::dataflow::TokenMeta> rows(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
          rows[static_cast<size_t>(i)].request_id = i;
          rows[static_cast<size_t>(i)].flags = engine::dataflow::kSample;
        }
        std::vector<engine::topology::SamplingSpec> sampling(static_cast<size_t>(n));
        std::vector<int32_t> tokens;
        std::vector<std::vector<float>> logits;
        double unused = 0;
        w.exec->sample(rows, w.h.data(), sampling, &tokens, &logits, &unused);
      };
      out.push_back(std::move(p));
    }
    return out;
  }

 private:
  ModelConfig config_;
  int repeats_;
  int concurrent_;
  std::vector<Worker> workers_;
};

/// A tiny model with `c`'s structure (layers, experts, top-k, FFN kind): its kernels take
/// microseconds, so a run of it is the actors' host time. The FFN gives each of `devices`
/// MoEShard shards a multiple of 8 units (cuda's bf16 GEMM reads 16-byte chunks).
ModelConfig tiny_model(const ModelConfig& c, int64_t devices) {
  ModelConfig t = c;
  t.hidden_size = 16;
  t.num_heads = 2;
  t.num_kv_heads = 1;
  t.head_dim = 8;
  t.expert_ffn = std::max<int64_t>(16, 8 * devices);
  t.shared_expert_ffn = c.shared_expert_ffn > 0 ? 16 : 0;
  t.vocab_size = 64;
  return t;
}

std::vector<engine::serving::Request> overhead_requests(int64_t vocab) {
  std::vector<engine::serving::Request> out;
  for (int i = 0; i < 4; ++i) {
    engine::serving::Request r;
    r.id = i;
    r.max_new_tokens = 48;
    for (int p = 0; p < 8; ++p)
      r.prompt.push_back(static_cast<int32_t>(3 + (i * 7 + p) % (vocab - 3)));
    out.push_back(std::move(r));
  }
  return out;
}

/// `cpu` (a cpu-backend topology of model `config`) as a sim topology that replays its run:
/// the routing it recorded to `routing`, in-process links, the kernel table `kernels` and no
/// other overheads, no trace or routing record.
Topology replay_in_sim(const Topology& cpu, const ModelConfig& config, const fs::path& routing,
                       const fs::path& kernels, const std::string& sim_kind) {
  Topology sim = cpu;
  sim.backend = "sim";
  for (auto& d : sim.devices) d.kind = sim_kind;
  sim.model.synthetic = config;
  sim.model.path.clear();
  sim.model.preset.clear();
  sim.routing_record_file.clear();
  sim.trace_file.clear();
  sim.network.intra_node = "in-process";
  sim.network.inter_node = "in-process";
  sim.network.where.clear();
  sim.router.kind = "recorded";
  sim.router.trace_file = routing.string();
  sim.cost = {};
  sim.cost.kernels = kernels.string();
  sim.cost.kernels_where = "<calibrate>";
  return sim;
}

/// Serves `requests` on `topology` to the end; `keep_trace`: the outcome holds the run's
/// trace (Server::set_keep_trace). Errors: the server's, or the run's.
absl::StatusOr<RunOutcome> run_to_end(const Topology& topology,
                                      const std::vector<engine::serving::Request>& requests,
                                      bool keep_trace = false) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::create(topology);
  if (!server.ok()) return server.status();
  (*server)->set_keep_trace(keep_trace);
  absl::StatusOr<RunOutcome> out = (*server)->run(requests);
  if (!out.ok()) return out.status();
  if (!out->status.ok()) return out->status;
  return out;
}

/// `concurrent` executors of `server`'s backend, its devices' in turn (as many rounds of
/// make_executors as it takes). Errors: FailedPrecondition when the backend makes none (a
/// topology without devices), instead of asking forever.
absl::StatusOr<std::vector<std::shared_ptr<engine::exec::Executor>>> concurrent_executors(
    const Server& server, int concurrent) {
  std::vector<std::shared_ptr<engine::exec::Executor>> out;
  while (static_cast<int>(out.size()) < concurrent) {
    std::vector<std::shared_ptr<engine::exec::Executor>> round = server.make_executors();
    if (round.empty()) {
      return absl::FailedPreconditionError("calibrate: the backend made no executor (no devices)");
    }
    for (std::shared_ptr<engine::exec::Executor>& e : round) {
      if (static_cast<int>(out.size()) < concurrent) out.push_back(std::move(e));
    }
  }
  return out;
}

/// One timed point's row of the measured-kernels CSV ("op,tokens,context,width,seconds").
std::string point_row(const Point& p, double seconds) {
  return absl::StrFormat("%s,%d,%d,%d,%.9g\n", p.op, p.tokens, p.context, p.width, seconds);
}

/// Serves `requests` on `server` `rounds` times; each run's mean inter-token latency (ms).
/// Errors: a run's, or its outcome's.
absl::StatusOr<std::vector<double>> serve_rounds(
    Server& server, const std::vector<engine::serving::Request>& requests, int rounds) {
  std::vector<double> itl_ms;
  for (int round = 0; round < rounds; ++round) {
    absl::StatusOr<RunOutcome> out = server.run(requests);
    if (!out.ok()) return out.status();
    if (!out->status.ok()) return out->status;
    itl_ms.push_back(out->metrics.itl.mean_ms);
  }
  return itl_ms;
}

/// The closed batch the in-run host times are measured on: prompts of 8..96 tokens (prefill
/// chunks of many sizes) and 16..32 new tokens (decode batches shrinking as requests finish).
std::vector<engine::serving::Request> host_time_requests(int64_t vocab) {
  std::vector<engine::serving::Request> out;
  for (int i = 0; i < 24; ++i) {
    engine::serving::Request r;
    r.id = i;
    r.max_new_tokens = 16 + (i * 7) % 17;
    const int prompt = 8 + (i * 13) % 89;
    for (int p = 0; p < prompt; ++p) {
      r.prompt.push_back(static_cast<int32_t>(3 + (i * 31 + p * 7) % (vocab - 3)));
    }
    out.push_back(std::move(r));
  }
  return out;
}

/// Stage slices of a Chrome trace written by a run: (name, iteration, tokens) → durations in
/// µs, in trace order.
using Slices = std::map<std::tuple<std::string, int64_t, int64_t>, std::vector<double>>;

/// One barrier of a traced run: when its last source's contribution arrived, when its last
/// source run (the block's attention runs for a dispatch, its expert runs for the combine)
/// ended, when its first destination's run started (µs), and the rows it moved (the block's
/// expert-stage tokens of that iteration: a dispatch delivers them, the combine sends them
/// back).
struct BarrierSpan {
  double last_arrival_us = -1e300;
  double last_source_end_us = -1e300;
  double first_dest_us = 1e300;
  /// Where the barrier's host time starts: the last source run's end (the hop from a stage's
  /// end to its contribution's arrival at the collective is host time too: 34–39 µs on the
  /// 2-core VM, 0 in the sim), or the last arrival where no source ran.
  double start_us() const {
    return last_source_end_us > -1e299 ? last_source_end_us : last_arrival_us;
  }
};
/// (dispatch?, block, iteration) → span; rows by (block, iteration).
struct Barriers {
  std::map<std::tuple<bool, int64_t, int64_t>, BarrierSpan> spans;
  std::map<std::pair<int64_t, int64_t>, int64_t> rows;
};

/// Hand-offs between two queued stages on one device: consecutive runs of expert stages of
/// one barrier (same block and iteration, both delivered by its dispatch before the first
/// ran), keyed by (device, block, iteration, first stage, second stage) → µs from the first's
/// end to the second's start.
using Handoffs = std::map<std::tuple<int64_t, int64_t, int64_t, std::string, std::string>, double>;

/// What calibration reads of a run's trace, which the run kept in memory (RunOutcome::trace).
/// Written as JSON and parsed back, the traces of the traced runs and their sim replays took
/// two fifths of the time of SimPrediction's calibrations (perf, 2-core VM; 14.7 → 7.8 s for
/// the barrier-free one) and about 3 s of 37 on bench/topologies/predict-synthetic-2cpu.toml.
struct TraceRuns {
  Slices slices;
  Barriers barriers;
  Handoffs handoffs;
  /// Barrier-free wirings (runs of iteration -1): the hand-offs between a device's consecutive
  /// runs where the second run's stage had tokens queued when the first ended (its μ-queue
  /// depth in the trace), µs from the first's end to the second's start: the done → device
  /// actor → grant round trip, with nothing else to wait for. Unpaired: such runs are not the
  /// same runs in a replay.
  std::vector<double> free_handoffs_us;
};

/// The hand-offs among `runs` (one device's stage runs, any order; sorted here) of the
/// barriers in `barriers` (a barrier wiring's: its dispatch had a source).
void add_handoffs(int64_t device, std::vector<DeviceRun>& runs, const Barriers& barriers,
                  Handoffs& out) {
  std::sort(runs.begin(), runs.end(),
            [](const DeviceRun& a, const DeviceRun& b) { return a.start_us < b.start_us; });
  auto expert = [](const std::string& n) { return n.rfind("expert", 0) == 0; };
  for (size_t i = 1; i < runs.size(); ++i) {
    const DeviceRun& a = runs[i - 1];
    const DeviceRun& b = runs[i];
    if (!expert(a.name) || !expert(b.name) || a.block != b.block || a.iteration != b.iteration ||
        a.iteration < 0) {
      continue;
    }
    const auto span = barriers.spans.find({true, a.block, a.iteration});
    if (span == barriers.spans.end() || span->second.last_arrival_us < -1e299) continue;
    out[{device, a.block, a.iteration, a.name, b.name}] = b.start_us - a.end_us;
  }
}
/// Reads `outcome`'s trace (a run of a Server with set_keep_trace). Errors: Internal when the
/// outcome holds none; the reader's, prefixed with `what` (which run it was).
absl::StatusOr<TraceRuns> read_trace_runs(const RunOutcome& outcome, const std::string& what) {
  if (outcome.trace == nullptr) {
    return absl::InternalError(absl::StrCat("calibrate: ", what, " returned no trace"));
  }
  TraceRuns out;
  std::map<int64_t, std::vector<DeviceRun>> device_runs;
  std::map<int64_t, QueueDepths> depths;  // by device
  nlohmann::json other;
  auto int_arg = [](const nlohmann::json& a, const char* key, int64_t* v) {
    const auto it = a.find(key);
    if (it == a.end() || !it->is_number_integer()) return false;
    *v = it->get<int64_t>();
    return true;
  };
  absl::Status s = engine::trace::visit_recorded_events(
      *outcome.trace, what,
      [&](const engine::trace::TraceEventView& e) {
        constexpr std::string_view kQueue = "queue ";  // actors/stage.cpp's depth counter
        if (e.phase == 'C' && e.args != nullptr && e.name.rfind(kQueue, 0) == 0) {
          int64_t tokens = 0;
          if (int_arg(*e.args, "tokens", &tokens)) {
            depths[e.pid][std::string(e.name.substr(kQueue.size()))].emplace_back(e.ts_us, tokens);
          }
          return absl::OkStatus();
        }
        if (e.phase != 'X' || e.args == nullptr) return absl::OkStatus();
        const nlohmann::json& a = *e.args;
        const std::string_view name = e.name;
        int64_t block = 0, iteration = 0, tokens = 0;
        const bool has_block = int_arg(a, "block", &block);
        if (!int_arg(a, "iteration", &iteration)) return absl::OkStatus();
        // A source's wait at a barrier (not the network transfer after it): its arrival.
        for (const bool dispatch : {true, false}) {
          if (has_block && name.rfind(dispatch ? "wait dispatch b" : "wait combine b", 0) == 0 &&
              name.find("transfer") == std::string_view::npos) {
            BarrierSpan& b = out.barriers.spans[{dispatch, block, iteration}];
            b.last_arrival_us = std::max(b.last_arrival_us, e.ts_us);
            return absl::OkStatus();
          }
        }
        if (!int_arg(a, "tokens", &tokens)) return absl::OkStatus();  // not a stage slice
        out.slices[{std::string(name), iteration, tokens}].push_back(e.dur_us);
        if (!has_block) return absl::OkStatus();
        device_runs[e.pid].push_back(
            {e.ts_us, e.ts_us + e.dur_us, block, iteration, std::string(name)});
        // A destination's run: an expert stage after block b's dispatch; an attention stage
        // or the sampler (block = layers) after block b − 1's combine.
        const bool expert = name.rfind("expert", 0) == 0 || name.rfind("shards", 0) == 0;
        const bool after_combine = name.rfind("attn", 0) == 0 || name.rfind("sampler", 0) == 0;
        if (expert) {
          BarrierSpan& b = out.barriers.spans[{true, block, iteration}];
          b.first_dest_us = std::min(b.first_dest_us, e.ts_us);
          out.barriers.rows[{block, iteration}] += tokens;
          BarrierSpan& c = out.barriers.spans[{false, block, iteration}];
          c.last_source_end_us = std::max(c.last_source_end_us, e.ts_us + e.dur_us);
        } else if (after_combine && block > 0) {
          BarrierSpan& b = out.barriers.spans[{false, block - 1, iteration}];
          b.first_dest_us = std::min(b.first_dest_us, e.ts_us);
        }
        if (name.rfind("attn", 0) == 0) {
          BarrierSpan& d = out.barriers.spans[{true, block, iteration}];
          d.last_source_end_us = std::max(d.last_source_end_us, e.ts_us + e.dur_us);
        }
        return absl::OkStatus();
      },
      &other);
  if (!s.ok()) return s;
  for (auto& [device, runs] : device_runs) {
    add_handoffs(device, runs, out.barriers, out.handoffs);
    add_queued_handoffs(runs, depths[device], out.free_handoffs_us);
  }
  return out;
}

using HostBuckets = kernels::sim::HostTimeTable::Samples;
/// log(measured span / modeled span) of matched stage runs, by stage kind and size bucket
/// (kernels::sim::run_spread_of).
using SpreadSamples =
    std::map<kernels::sim::MeasuredKernels::RunKind, std::map<int, std::vector<double>>>;

/// Adds one traced run's in-run host times to `buckets`: each measured stage run's span minus
/// the sim's span of the same run; and the log of their ratio to `spread` (runs with both
/// spans > 0).
void add_host_time_samples(const Slices& measured, const Slices& modeled, HostBuckets& buckets,
                           SpreadSamples& spread) {
  using Kind = kernels::sim::MeasuredKernels::RunKind;
  // Excess of each measured run over the kernel time of the same run (same stage, iteration
  // and tokens), by stage kind and size bucket (kernels::sim::host_time_bucket).
  for (const auto& [key, cpu_us] : measured) {
    auto found = modeled.find(key);
    if (found == modeled.end()) continue;
    const auto& [name, iteration, tokens] = key;
    if (tokens < 1) continue;
    Kind kind;
    if (name.rfind("attn", 0) == 0) {
      kind = Kind::kAttention;
    } else if (name.rfind("expert", 0) == 0 || name.rfind("shards", 0) == 0) {
      // expert stages: one expert ("expert b e"), a device's experts (HarMoEny, "experts b
      // d") or a device's MoEShard shards ("shards b d")
      kind = Kind::kExpert;
    } else if (name.rfind("sampler", 0) == 0) {
      kind = Kind::kSampler;
    } else {
      continue;
    }
    const int bucket = kernels::sim::host_time_bucket(tokens);
    for (size_t i = 0; i < std::min(cpu_us.size(), found->second.size()); ++i) {
      buckets[{kind, bucket}].emplace_back(tokens, (cpu_us[i] - found->second[i]) * 1e-6);
      if (cpu_us[i] > 0 && found->second[i] > 0) {
        const double r = std::log(cpu_us[i] / found->second[i]);
        if (std::isfinite(r)) spread[kind][bucket].push_back(r);
      }
    }
  }
}

/// Adds one traced run's barrier host times to `buckets`: each barrier's gap from its last
/// source run's end (BarrierSpan::start_us) to its first destination's run, measured minus
/// modeled (the same barrier: kind, block, iteration and rows), by size bucket of its rows
/// (kernels::sim::host_time_bucket).
void add_barrier_samples(const Barriers& measured, const Barriers& modeled, HostBuckets& buckets) {
  using Kind = kernels::sim::MeasuredKernels::RunKind;
  for (const auto& [key, span] : measured.spans) {
    const auto& [dispatch, block, iteration] = key;
    if (iteration < 0) continue;  // barrier-free wirings have no barriers
    const auto other = modeled.spans.find(key);
    const auto rows = measured.rows.find({block, iteration});
    const auto other_rows = modeled.rows.find({block, iteration});
    if (other == modeled.spans.end() || rows == measured.rows.end() ||
        other_rows == modeled.rows.end() || rows->second != other_rows->second ||
        rows->second < 1) {
      continue;  // not the same barrier in both runs
    }
    if (span.last_arrival_us < -1e299 || other->second.last_arrival_us < -1e299) continue;
    const double gap_us = span.first_dest_us - span.start_us();
    const double modeled_us = other->second.first_dest_us - other->second.start_us();
    if (!(gap_us >= 0 && gap_us < 1e12) || !(modeled_us >= 0 && modeled_us < 1e12)) continue;
    const int bucket = kernels::sim::host_time_bucket(rows->second);
    buckets[{dispatch ? Kind::kDispatch : Kind::kCombine, bucket}].emplace_back(
        rows->second, (gap_us - modeled_us) * 1e-6);
  }
}

/// Adds one traced run's grant samples to `buckets` (kind kGrant, bucket 0): each hand-off's
/// gap, measured minus modeled (the same device, barrier and pair of stages).
void add_grant_samples(const Handoffs& measured, const Handoffs& modeled, HostBuckets& buckets) {
  for (const auto& [key, gap_us] : measured) {
    const auto other = modeled.find(key);
    if (other == modeled.end()) continue;
    if (!(gap_us >= 0 && gap_us < 1e12) || !(other->second >= 0 && other->second < 1e12)) {
      continue;
    }
    buckets[{kernels::sim::MeasuredKernels::RunKind::kGrant, 0}].emplace_back(
        1, (gap_us - other->second) * 1e-6);
  }
}

/// Adds one traced run's barrier-free hand-offs to `buckets` (kind kGrant, bucket 0), unpaired:
/// each measured hand-off less the modeled ones' trimmed mean (none modeled: less 0).
void add_free_grant_samples(const std::vector<double>& measured_us,
                            const std::vector<double>& modeled_us, HostBuckets& buckets) {
  const double modeled = modeled_us.empty() ? 0.0 : kernels::sim::trimmed_mean(modeled_us);
  for (const double gap_us : measured_us) {
    if (!(gap_us >= 0 && gap_us < 1e12)) continue;
    buckets[{kernels::sim::MeasuredKernels::RunKind::kGrant, 0}].emplace_back(
        1, (gap_us - modeled) * 1e-6);
  }
}

/// What measure_host_times measures: the rows "host_<kind>,n,0,0,s" and the runs' spread as
/// one metadata line "# spread_attention=σ spread_expert=σ spread_sampler=σ".
struct HostTimes {
  std::string rows;
  std::string spread;
};

/// In-run host time per stage kind and the runs' spread (see calibrate).
absl::StatusOr<HostTimes> measure_host_times(
    const Topology& topology, const ModelConfig& config, const std::string& kernel_rows,
    const fs::path& scratch, const std::string& sim_kind,
    const std::function<void(const std::string&)>& progress) {
  using Kind = kernels::sim::MeasuredKernels::RunKind;
  const std::vector<engine::serving::Request> requests = host_time_requests(config.vocab_size);
  // The real model on the cpu backend, traced (in memory), its routing recorded (each run
  // overwrites the file). One server: a warm-up run first, since a fresh server's first run pays
  // page faults and cold caches (SimPrediction's model: 44 ms of prefill cold, 7 ms warm), then
  // kHostTimeRuns measured runs whose samples are pooled (with one cold run, the medians of
  // the larger buckets moved by up to 24x between three calibrations on one machine).
  Topology cpu = topology;
  cpu.trace_file.clear();
  cpu.routing_record_file = (scratch / "host-routing.csv").string();
  cpu.sampling.stop_at_eos = false;
  absl::StatusOr<std::unique_ptr<Server>> cpu_server = Server::create(cpu);
  if (!cpu_server.ok()) return cpu_server.status();
  (*cpu_server)->set_keep_trace(true);
  // The traced runs, kept for the sim replays below (each with a copy of its routing).
  struct Traced {
    TraceRuns runs;
    fs::path routing;
    double itl_ms = 0;
  };
  std::vector<Traced> traced;
  // Eight: the larger buckets get a few runs per traced run (a first prefill, its spill), and
  // with three their rows moved several-fold between calibrations (sync's 182-row host_expert
  // 23 to 272 us over six), which moved the predicted TTFT by 10 % (bench/README.md, stop 50).
  constexpr int kHostTimeRuns = 8;
  for (int run = 0; run <= kHostTimeRuns; ++run) {
    absl::StatusOr<RunOutcome> out = (*cpu_server)->run(requests);
    if (!out.ok()) return out.status();
    if (!out->status.ok()) return out->status;
    if (run == 0) continue;  // the warm-up
    absl::StatusOr<TraceRuns> measured =
        read_trace_runs(*out, absl::StrCat("traced run ", run, " of the real model"));
    if (!measured.ok()) return measured.status();
    const fs::path routing = scratch / absl::StrCat("host-routing-", run, ".csv");
    std::error_code ec;
    fs::copy_file(cpu.routing_record_file, routing, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("calibrate: cannot copy ", cpu.routing_record_file,
                                              " to ", routing.string(), ": ", ec.message()));
    }
    traced.push_back({*std::move(measured), routing, out->metrics.itl.mean_ms});
    progress(absl::StrFormat("in-run host time: traced run %d/%d done", run, kHostTimeRuns));
  }
  // Replays every traced run in the sim with the kernel rows and `host_rows` (no other
  // overhead) and pools each run's samples, measured minus modeled; `itl_ms`: the replays'
  // mean inter-token latency.
  const fs::path kernels = scratch / "host-kernels.csv";
  SpreadSamples spread;  // of the last replay
  auto replay = [&](const std::string& host_rows, double* itl_ms) -> absl::StatusOr<HostBuckets> {
    std::ofstream(kernels) << kernel_rows << host_rows;
    HostBuckets samples;
    spread.clear();
    *itl_ms = 0;
    for (const Traced& t : traced) {
      const Topology sim = replay_in_sim(cpu, config, t.routing, kernels, sim_kind);
      absl::StatusOr<RunOutcome> o = run_to_end(sim, requests, /*keep_trace=*/true);
      if (!o.ok()) return o.status();
      *itl_ms += o->metrics.itl.mean_ms / static_cast<double>(traced.size());
      absl::StatusOr<TraceRuns> modeled = read_trace_runs(*o, "a sim replay of a traced run");
      if (!modeled.ok()) return modeled.status();
      add_host_time_samples(t.runs.slices, modeled->slices, samples, spread);
      add_barrier_samples(t.runs.barriers, modeled->barriers, samples);
      add_grant_samples(t.runs.handoffs, modeled->handoffs, samples);
      add_free_grant_samples(t.runs.free_handoffs_us, modeled->free_handoffs_us, samples);
    }
    return samples;
  };
  double measured_itl_ms = 0;
  for (const Traced& t : traced) measured_itl_ms += t.itl_ms / static_cast<double>(traced.size());
  // The excess over the kernel rows alone, then kHostRefinements replays that charge the rows
  // so far (kernels/sim/host_time_table.hpp). (The tiny model's barrier and grant times are
  // taken out of stage_overhead, so these rows hold the whole of the real model's.)
  double itl_ms = 0;
  absl::StatusOr<HostBuckets> excess = replay("", &itl_ms);
  if (!excess.ok()) return excess.status();
  progress(absl::StrFormat(
      "in-run host time: the traced runs' mean inter-token latency %.3f ms, their replay's with "
      "the kernel rows alone %.3f ms",
      measured_itl_ms, itl_ms));
  // A row needs two samples per traced run: a bucket with fewer holds one run of the closed
  // batch eight times over (the same sizes each run: sync's 64–127-token expert bucket is one
  // 101-token run). Its row moved from -1.2 to +3.6 ms over seven calibrations on the 2-core
  // AVX2 VM (the bucket's kernel row plus host row: 8.3–11.2 ms), and the 3.6 ms one put
  // the predicted TTFT of sync at 16 requests/s 33 % high; the neighbours' rows interpolate
  // it instead (bench/README.md, stop 52).
  kernels::sim::HostTimeTable table(*excess, 2 * kHostTimeRuns);
  constexpr int kHostRefinements = 2;
  for (int round = 1; round <= kHostRefinements; ++round) {
    absl::StatusOr<HostBuckets> residual = replay(table.rows(), &itl_ms);
    if (!residual.ok()) return residual.status();
    const double moved_s = table.refine(*residual);
    progress(absl::StrFormat(
        "in-run host time: refinement %d/%d: replayed with the rows so far %.3f ms; rows moved "
        "by up to %.1f us",
        round, kHostRefinements, itl_ms, moved_s * 1e6));
  }
  // The runs' spread around the last replay's times (which charged all but the last move):
  // one metadata line, and a replay with it, whose inter-token latency progress reports.
  std::string spread_meta, spread_text;  // "key=σ ..." for the file, "key σ, ..." to read
  for (const Kind k : {Kind::kAttention, Kind::kExpert, Kind::kSampler}) {
    const std::string sigma = absl::StrFormat("%.4f", kernels::sim::run_spread_of(spread[k]));
    absl::StrAppend(&spread_meta, " ", kernels::sim::run_spread_key(k), "=", sigma);
    absl::StrAppend(&spread_text, " ", kernels::sim::run_spread_key(k), " ", sigma);
  }
  HostTimes out{table.rows(), absl::StrCat("#", spread_meta, "\n")};
  if (absl::StatusOr<HostBuckets> last = replay(out.rows + out.spread, &itl_ms); last.ok()) {
    progress(absl::StrFormat(
        "in-run host time: run spread (trimmed log RMS)%s; replayed with it %.3f ms", spread_text,
        itl_ms));
  } else {  // a report only: the rows and the spread are measured
    progress(absl::StrCat("in-run host time: run spread", spread_text,
                          "; warning: the replay with it failed: ", last.status().message()));
  }
  return out;
}

/// Host seconds per stage run (see calibrate), less the tiny model's own barrier and grant
/// times and its own stage runs' calls: the per-run figure is what is left of the tiny model's
/// inter-token time once the sim charges those as the host_dispatch / host_combine /
/// host_grant rows and the kernel rows do on the real model. The calls are timed as the real
/// model's rows are (Measurer, `repeats` calls on `concurrent` devices at once): on cuda a
/// call is an upload, launches, a download and a stream synchronization, tens of µs even on
/// the tiny model, and every real row already holds that round trip, so leaving it in here
/// would charge it twice per stage run (it is µs on cpu).
absl::StatusOr<double> measure_stage_overhead(const Topology& topology, const fs::path& scratch,
                                              const std::string& sim_kind, int repeats,
                                              int concurrent) {
  Topology cpu = topology;  // already on the measured backend
  const ModelConfig tiny =
      tiny_model(*cpu.model.synthetic, static_cast<int64_t>(cpu.devices.size()));
  cpu.model.synthetic = tiny;
  cpu.model.path.clear();
  cpu.model.preset.clear();
  cpu.model.gemm = "auto";
  cpu.trace_file.clear();  // the timed runs are not traced (tracing costs host time)
  cpu.sampling.stop_at_eos = false;
  cpu.routing_record_file = (scratch / "routing.csv").string();
  absl::StatusOr<std::unique_ptr<Server>> cpu_server = Server::create(cpu);
  if (!cpu_server.ok()) return cpu_server.status();
  const std::vector<engine::serving::Request> requests = overhead_requests(tiny.vocab_size);
  absl::StatusOr<std::vector<double>> itl_ms = serve_rounds(**cpu_server, requests, 3);
  if (!itl_ms.ok()) return itl_ms.status();
  const double cpu_itl_ms = median(*itl_ms);  // the median of three runs
  // A traced server (in memory) for the gaps: a warm-up run, then the run that is read (each
  // overwrites the routing).
  absl::StatusOr<std::unique_ptr<Server>> traced_server = Server::create(cpu);
  if (!traced_server.ok()) return traced_server.status();
  (*traced_server)->set_keep_trace(true);
  if (absl::StatusOr<std::vector<double>> r = serve_rounds(**traced_server, requests, 1); !r.ok()) {
    return r.status();
  }
  absl::StatusOr<RunOutcome> traced_run = (*traced_server)->run(requests);
  if (!traced_run.ok()) return traced_run.status();
  if (!traced_run->status.ok()) return traced_run->status;
  absl::StatusOr<TraceRuns> measured = read_trace_runs(*traced_run, "the tiny model's traced run");
  if (!measured.ok()) return measured.status();
  traced_run->trace.reset();
  // The same topology in the sim: zero kernel time, the traced run's own routing.
  const fs::path zero = scratch / "zero-kernels.csv";
  const std::string zero_rows = [&] {
    std::string z =
        meta_line(sim_kind, tiny, cpu.model.dtype, 1, 1) + "op,tokens,context,width,seconds\n";
    for (int n : {1, 2}) {
      absl::StrAppend(&z, "attention,", n, ",1,0,0\nexpert,", n, ",0,", tiny.expert_ffn,
                      ",0\nlm_head,", n, ",0,0,0\n");
    }
    return z;
  }();
  std::ofstream(zero) << zero_rows;
  // The tiny model's stage-run calls on the measured backend (decode batches of up to 4
  // requests, 8-token prompts, contexts below 64).
  const ModelConfig served = (*cpu_server)->config();
  std::string tiny_rows =
      meta_line(sim_kind, served, cpu.model.dtype,
                static_cast<int64_t>((*cpu_server)->gemm_threads_per_device()), concurrent) +
      "op,tokens,context,width,seconds\n";
  {
    absl::StatusOr<std::vector<std::shared_ptr<engine::exec::Executor>>> executors =
        concurrent_executors(**cpu_server, concurrent);
    if (!executors.ok()) return executors.status();
    Measurer m(served, std::move(*executors), repeats);
    for (const Point& p : m.points(8, 64, /*evict=*/false)) {
      absl::StatusOr<double> sec = m.measure(p);
      if (!sec.ok()) {
        return absl::InternalError(absl::StrFormat("the tiny model's %s with %d tokens: %s", p.op,
                                                   p.tokens, sec.status().message()));
      }
      absl::StrAppend(&tiny_rows, point_row(p, *sec));
    }
  }
  Topology sim = replay_in_sim(cpu, *cpu.model.synthetic, scratch / "routing.csv", zero, sim_kind);
  // The tiny model's barrier and grant times: its last traced run against the same run in the
  // sim at zero cost (pooled over sizes: the tiny model's barriers move few rows).
  absl::StatusOr<RunOutcome> replayed = run_to_end(sim, requests, /*keep_trace=*/true);
  if (!replayed.ok()) return replayed.status();
  absl::StatusOr<TraceRuns> modeled =
      read_trace_runs(*replayed, "the sim replay of the tiny model's traced run");
  if (!modeled.ok()) return modeled.status();
  HostBuckets gaps;
  add_barrier_samples(measured->barriers, modeled->barriers, gaps);
  add_grant_samples(measured->handoffs, modeled->handoffs, gaps);
  add_free_grant_samples(measured->free_handoffs_us, modeled->free_handoffs_us, gaps);
  using Kind = kernels::sim::MeasuredKernels::RunKind;
  std::map<Kind, std::vector<double>> pooled;
  for (const auto& [key, samples] : gaps) {
    for (const auto& [n, sec] : samples) pooled[key.first].push_back(sec);
  }
  std::string gap_rows;
  for (const auto& [kind, v] : pooled) {
    if (v.size() < 5) continue;
    for (int n : {1, 1 << 20})
      absl::StrAppend(&gap_rows,
                      kernels::sim::host_time_row(kind, n, kernels::sim::trimmed_mean(v)));
  }
  // Critical-path stage runs per decode step: the sim at zero cost and 1 µs per stage run.
  sim.cost.overheads.stage_us = 1.0;
  absl::StatusOr<RunOutcome> s = run_to_end(sim, requests);
  if (!s.ok()) return s.status();
  const double runs_per_step = s->metrics.itl.mean_ms * 1e3;  // µs at 1 µs per stage run
  if (!(runs_per_step > 0)) return absl::InternalError("the sim run reported no inter-token time");
  // The tiny model's inter-token time from its calls, barriers and grants alone.
  const fs::path charged = scratch / "tiny-kernels-gaps.csv";
  std::ofstream(charged) << tiny_rows << gap_rows;
  Topology g = sim;
  g.cost.overheads.stage_us = 0.0;
  g.cost.kernels = charged.string();
  absl::StatusOr<RunOutcome> o = run_to_end(g, requests);
  if (!o.ok()) return o.status();
  return std::max(0.0, cpu_itl_ms - o->metrics.itl.mean_ms) * 1e-3 / runs_per_step;
}

}  // namespace

absl::Status calibrate(const Topology& topology, const CalibrationOptions& options,
                       std::ostream& out) {
  if (options.max_tokens < 8 || options.max_tokens > 2048 || options.max_context < 1 ||
      options.max_context > 2048 || options.repeats < 1 || options.repeats > 100 ||
      options.concurrent < 0 || options.concurrent > 64) {
    return absl::InvalidArgumentError(
        "calibrate: max tokens in [8, 2048], max context in [1, 2048], repeats in [1, 100], "
        "concurrent in [0, 64]");
  }
  if (options.backend != "cpu" && options.backend != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("calibrate: backend '", options.backend, "': expected cpu or cuda"));
  }
  // `cpu` is the topology on the measured backend (cpu or cuda).
  Topology cpu = topology;
  cpu.backend = options.backend;
  for (auto& d : cpu.devices) d.kind = options.backend;
  cpu.trace_file.clear();
  cpu.routing_record_file.clear();
  if (!cpu.model.preset.empty()) {
    return absl::InvalidArgumentError(
        "calibrate: preset models have no weights; give synthetic dims or a model folder");
  }
  absl::StatusOr<std::unique_ptr<Server>> server = Server::create(cpu);
  if (!server.ok()) return server.status();
  const ModelConfig config = (*server)->config();
  if (config.vocab_size <= 3) {  // the workloads below draw tokens from [3, vocab)
    return absl::InvalidArgumentError(absl::StrCat(
        "calibrate: the model's vocab_size is ", config.vocab_size,
        "; calibration's requests need token ids above the 3 special ones (vocab_size >= 4)"));
  }
  const int threads = static_cast<int>((*server)->gemm_threads_per_device());
  const int concurrent =
      options.concurrent > 0 ? options.concurrent : static_cast<int>(cpu.devices.size());
  // The sim kind the rows describe: "cpu", or the GPU's (e.g. "H200").
  const std::string sim_kind = (*server)->rate_kind();
  absl::StatusOr<std::vector<std::shared_ptr<engine::exec::Executor>>> executors =
      concurrent_executors(**server, concurrent);
  if (!executors.ok()) return executors.status();
  auto progress = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };

  out << "# muflow calibrate: " << options.backend << " backend, " << concurrent
      << " device thread(s) measuring at once, median of " << options.repeats << " calls\n"
      << meta_line(sim_kind, config, cpu.model.dtype, threads, concurrent)
      << "op,tokens,context,width,seconds\n";
  out.flush();
  // Everything written so far, for the sim run of the in-run host time measurement.
  std::string kernel_rows =
      absl::StrCat(meta_line(sim_kind, config, cpu.model.dtype, threads, concurrent),
                   "op,tokens,context,width,seconds\n");
  {
    Measurer m(config, std::move(*executors), options.repeats);
    const std::vector<Point> points = m.points(options.max_tokens, options.max_context);
    for (size_t i = 0; i < points.size(); ++i) {
      const Point& p = points[i];
      absl::StatusOr<double> s = m.measure(p);
      if (!s.ok()) {
        return absl::InternalError(absl::StrFormat("calibrate: %s with %d tokens, context %d: %s",
                                                   p.op, p.tokens, p.context,
                                                   s.status().message()));
      }
      const std::string row = point_row(p, *s);
      out << row;
      kernel_rows += row;
      out.flush();
      if (i + 1 == points.size() || points[i + 1].op != p.op) {
        progress(absl::StrFormat("measured %s (%d/%d points)", p.op, i + 1, points.size()));
      }
    }
  }
  // The runs below start servers of their own: this one's model (on cuda, a copy in GPU
  // memory) and the executors above are released first.
  server->reset();
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);
  const fs::path scratch = tmp / absl::StrCat("muflow_calibrate_", ::getpid());
  if (ec || (fs::create_directories(scratch, ec), ec)) {
    return absl::FailedPreconditionError(absl::StrCat("calibrate: cannot make the scratch folder ",
                                                      scratch.string(), ": ", ec.message(),
                                                      " (set TMPDIR to a writable folder)"));
  }
  // In-run host time per stage kind, on the real model.
  // The rows are optional: a failed run costs them only, with a warning.
  absl::StatusOr<HostTimes> host =
      measure_host_times(cpu, config, kernel_rows, scratch, sim_kind, progress);
  if (host.ok()) {
    out << host->rows << host->spread;
    out.flush();
    progress(
        absl::StrFormat("measured in-run host time per stage kind (%d rows) and the runs' "
                        "spread",
                        std::count(host->rows.begin(), host->rows.end(), '\n')));
  } else {
    progress(absl::StrCat("warning: in-run host time not measured (no host_* rows): ",
                          host.status().message()));
  }
  // Host overhead per stage run, on a tiny model with the same structure and wiring.
  cpu.model.synthetic = config;
  absl::StatusOr<double> overhead =
      measure_stage_overhead(cpu, scratch, sim_kind, options.repeats, concurrent);
  fs::remove_all(scratch, ec);
  if (!overhead.ok()) {
    return absl::InternalError(
        absl::StrCat("calibrate: stage overhead run: ", overhead.status().message()));
  }
  out << "stage_overhead,0,0,0," << absl::StrFormat("%.9g", *overhead) << '\n';
  out.flush();
  progress(absl::StrFormat("measured stage_overhead: %.1f us per stage run%s", *overhead * 1e6,
                           *overhead > 0 ? ""
                                         : " (the tiny model's calls, barriers and grants take "
                                           "all of its inter-token time)"));
  return absl::OkStatus();
}

}  // namespace muflow::actors
