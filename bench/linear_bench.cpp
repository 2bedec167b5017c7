// The cost of batch invariance on the CPU backend.
//
// muflow's Linear runs every full tile through one oneDNN matmul primitive of shape
// [kLinearMTile, K]·[K, N]; the remainder goes through a checked [1, K] primitive one row at a
// time (≤ kLinearSmallMMaxRows{F32,BF16} rows, when the construction probe passed) or one zero-padded
// tile (kernels/cpu/linear.hpp). The natural, non-batch-invariant way is one primitive created
// for the exact M (prepacked weights too). This compares:
//   BM_Linear_{Muflow,PerM}       one Linear, shape 0: K = 1024 → N = 4096 (hidden → ffn),
//                                 shape 1: K = 4096 → N = 1024 (ffn → hidden); Muflow with
//                                 fast = 2 (default: the fixed-order kernel), 1 (oneDNN tiles
//                                 with the small-M path) or 0 (padded oneDNN tiles only)
//   BM_FixedOrder                 the fixed-order kernel alone (kernels/cpu/fixed_order_gemm.hpp)
//                                 on the same shapes, 1 or 2 threads, weights hot in L3 or cold
//                                 (8 rotating copies, 128 MiB f32: read from DRAM every call)
//   BM_ExpertFfn_{Muflow,PerM}    SwiGLU expert, hidden 1024, ffn 4096: gate|up GEMM, swiglu,
//                                 down GEMM (Muflow with fast = 0 / 1 / 2, as for Linear)
//   BM_Linear_FixedTile           muflow's padded-tile algorithm with tile T ∈ {8, 16, 32}
//                                 (to choose kLinearMTile; T = 16 is Linear's tile)
//   BM_Linear_Construct           construction cost (fast = 0: no probe; 1: the probe forced
//                                 to run, bypassing the per-process verdict cache)
// for M ∈ {1..8, 16, 32, 128, 512} (FixedTile: {1, 8, 32, 128, 512}), f32 and bf16 weights.
// The GFLOPs counter counts useful work only (2·M·K·N per GEMM, padding excluded). All runs
// are single-threaded oneDNN, as in the engine (one executor thread per device). Run: see
// bench/README.md.

#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/bf16.hpp"
#include "kernels/cpu/expert_ffn.hpp"
#include "kernels/cpu/fixed_order_gemm.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/reference/test_inputs.hpp"

namespace {

using muflow::kernels::cpu::ExpertFfn;
using muflow::kernels::cpu::kLinearMTile;
using muflow::kernels::cpu::Linear;
using muflow::kernels::cpu::LinearOptions;
using muflow::kernels::cpu::swiglu;
using muflow::kernels::reference::random_floats;
using muflow::kernels::reference::SplitMix64;

constexpr int64_t kHidden = 1024;
constexpr int64_t kFfn = 4096;
constexpr uint64_t kSeed = 42;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  muflow::kernels::cpu::f32_to_bf16_n(v.data(), static_cast<int64_t>(v.size()), out.data());
  return out;
}

/// A plain oneDNN matmul y[M, N] = x[M, K]·Wᵀ for one fixed M (the baseline), weights
/// prepacked from HF [N, K]. bf16: x is converted to bf16 inside `run` (same work as Linear).
class OneDnnMatmul {
 public:
  OneDnnMatmul(const void* weight, bool bf16, int64_t m, int64_t n, int64_t k)
      : bf16_(bf16), m_(m), n_(n), k_(k) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dt wdt = bf16 ? dt::bf16 : dt::f32;
    const dnnl::memory::desc src_md({m, k}, wdt, tag::ab);
    const dnnl::memory::desc dst_md({m, n}, dt::f32, tag::ab);
    const dnnl::memory::desc any_w({k, n}, wdt, tag::any);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, any_w, dst_md), engine());
    matmul_ = dnnl::matmul(pd);
    dnnl::memory user_w(dnnl::memory::desc({k, n}, wdt, dnnl::memory::dims{1, k}), engine(),
                        const_cast<void*>(weight));
    weights_ = dnnl::memory(pd.weights_desc(), engine());
    src_ = dnnl::memory(src_md, engine());
    dst_ = dnnl::memory(dst_md, engine(), nullptr);
    dnnl::stream s(engine());
    dnnl::reorder(user_w, weights_).execute(s, user_w, weights_);
    s.wait();
  }

  void run(const float* x, float* y, dnnl::stream& stream) {
    if (bf16_) {
      muflow::kernels::cpu::f32_to_bf16_n(x, m_ * k_, static_cast<uint16_t*>(src_.get_data_handle()));
    } else {
      src_.set_data_handle(const_cast<float*>(x));
    }
    dst_.set_data_handle(y);
    matmul_.execute(stream, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, dst_}});
  }

 private:
  bool bf16_;
  int64_t m_, n_, k_;
  dnnl::matmul matmul_;
  dnnl::memory weights_, src_, dst_;
};

/// Shared random weights of the benchmark shapes (built once).
struct Weights {
  std::vector<float> gate, up, down, gate_up;
  std::vector<uint16_t> gate16, up16, down16, gate_up16;
  static const Weights& get() {
    static const Weights w = [] {
      Weights out;
      SplitMix64 rng(kSeed);
      out.gate = random_floats(rng, kFfn * kHidden, -0.05f, 0.05f);
      out.up = random_floats(rng, kFfn * kHidden, -0.05f, 0.05f);
      out.down = random_floats(rng, kHidden * kFfn, -0.05f, 0.05f);
      out.gate_up = out.gate;
      out.gate_up.insert(out.gate_up.end(), out.up.begin(), out.up.end());
      out.gate16 = to_bf16(out.gate);
      out.up16 = to_bf16(out.up);
      out.down16 = to_bf16(out.down);
      out.gate_up16 = to_bf16(out.gate_up);
      return out;
    }();
    return w;
  }
};

/// Whether oneDNN creates bf16 matmuls of the benchmark's sizes on this CPU: oneDNN 2.6 on an
/// AVX2-only CPU creates some (M = 1) and throws "could not create a primitive descriptor
/// iterator" for others, so the bf16 baselines are skipped there instead of ending the run.
bool onednn_bf16_matmul_available() {
  static const bool available = [] {
    try {
      for (const int64_t m : {1, 8, 16, 32, 128, 512}) {
        OneDnnMatmul probe(Weights::get().gate16.data(), true, m, kFfn, kHidden);
      }
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return available;
}

void set_counters(benchmark::State& state, double flops_per_iter) {
  state.counters["GFLOPs"] =
      benchmark::Counter(flops_per_iter / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// state.range(0) = M, state.range(1) = 1 for bf16; Linear families: state.range(2) = shape
// (0: 1024 → 4096, 1: 4096 → 1024); Muflow families: last range = fast (small-M path allowed).

struct LinearShape {
  int64_t in, out;
};

LinearShape linear_shape(int64_t index) {
  return index == 0 ? LinearShape{kHidden, kFfn} : LinearShape{kFfn, kHidden};
}

/// The weights of a Linear shape: gate [ffn, hidden] for 1024 → 4096, down for 4096 → 1024.
const void* linear_weights(int64_t shape, bool bf16) {
  const Weights& w = Weights::get();
  if (shape == 0) return bf16 ? static_cast<const void*>(w.gate16.data()) : w.gate.data();
  return bf16 ? static_cast<const void*>(w.down16.data()) : w.down.data();
}

/// fast = 0: oneDNN tiles only; 1: oneDNN tiles with the checked small-M path; 2: Linear's
/// default (the fixed-order kernel where the CPU has it).
LinearOptions fast_options(int64_t fast) {
  LinearOptions options;
  if (fast == 2) return options;
  options.kernel = muflow::kernels::cpu::LinearKernel::kOneDnnTiles;
  options.allow_small_m_path = fast != 0;
  return options;
}

void BM_Linear_Muflow(benchmark::State& state) {
  const int64_t m = state.range(0);
  const bool bf16 = state.range(1) != 0;
  const LinearShape shape = linear_shape(state.range(2));
  const void* weights = linear_weights(state.range(2), bf16);
  const LinearOptions options = fast_options(state.range(3));
  const Linear linear =
      bf16 ? Linear(static_cast<const uint16_t*>(weights), shape.out, shape.in, nullptr, options)
           : Linear(static_cast<const float*>(weights), shape.out, shape.in, nullptr, options);
  state.counters["small_path"] = linear.small_m_path_enabled() ? 1.0 : 0.0;
  SplitMix64 rng(kSeed + 1);
  const std::vector<float> x = random_floats(rng, m * shape.in, -1.0f, 1.0f);
  std::vector<float> y(m * shape.out);
  for (auto _ : state) {
    linear.forward(x.data(), m, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  set_counters(state, 2.0 * m * shape.in * shape.out);
}

void BM_Linear_PerM(benchmark::State& state) {
  const int64_t m = state.range(0);
  const bool bf16 = state.range(1) != 0;
  if (bf16 && !onednn_bf16_matmul_available()) {
    state.SkipWithError("oneDNN has no bf16 matmul on this CPU");
    return;
  }
  const LinearShape shape = linear_shape(state.range(2));
  OneDnnMatmul matmul(linear_weights(state.range(2), bf16), bf16, m, shape.out, shape.in);
  dnnl::stream stream(engine());
  SplitMix64 rng(kSeed + 1);
  const std::vector<float> x = random_floats(rng, m * shape.in, -1.0f, 1.0f);
  std::vector<float> y(m * shape.out);
  for (auto _ : state) {
    matmul.run(x.data(), y.data(), stream);
    stream.wait();
    benchmark::DoNotOptimize(y.data());
  }
  set_counters(state, 2.0 * m * shape.in * shape.out);
}

/// The fixed-order kernel alone (kernels/cpu/fixed_order_gemm.hpp), `threads` OpenMP threads.
/// bf16: the activations are converted to bf16 inside the loop (same work as Linear); on a
/// CPU without AVX512-BF16 the bf16 rows are skipped.
void BM_FixedOrder(benchmark::State& state) {
  namespace cpu = muflow::kernels::cpu;
  const int64_t m = state.range(0);
  const bool bf16 = state.range(1) != 0;
  const LinearShape shape = linear_shape(state.range(2));
  const int threads = static_cast<int>(state.range(3));
  // cold = 1: rotate over kColdCopies copies of the packed weights (128 MiB f32 in all, more
  // than the L3), so every call reads its weights from DRAM, as decode over many experts does.
  const bool cold = state.range(4) != 0;
  if (bf16 ? !cpu::fixed_order_gemm_bf16_available() : !cpu::fixed_order_gemm_f32_available()) {
    state.SkipWithError("kernel not available on this CPU");
    return;
  }
  const void* weights = linear_weights(state.range(2), bf16);
  SplitMix64 rng(kSeed + 1);
  const std::vector<float> x = random_floats(rng, m * shape.in, -1.0f, 1.0f);
  std::vector<float> y(m * shape.out);
  const int64_t padded_k = cpu::fixed_order_padded_k_bf16(shape.in);
  const std::size_t elems = bf16 ? cpu::fixed_order_packed_elems_bf16(shape.out, shape.in)
                                 : cpu::fixed_order_packed_elems_f32(shape.out, shape.in);
  const std::size_t bytes = (elems * (bf16 ? 2 : 4) + 63) / 64 * 64;
  constexpr int kColdCopies = 8;
  std::vector<std::unique_ptr<void, decltype(&std::free)>> copies;
  for (int c = 0; c < (cold ? kColdCopies : 1); ++c) {
    copies.emplace_back(std::aligned_alloc(64, bytes), &std::free);
    if (bf16) {
      cpu::fixed_order_pack_bf16(static_cast<const uint16_t*>(weights), shape.out, shape.in,
                                 static_cast<uint16_t*>(copies.back().get()));
    } else {
      cpu::fixed_order_pack_f32(static_cast<const float*>(weights), shape.out, shape.in,
                                static_cast<float*>(copies.back().get()));
    }
  }
  std::vector<uint16_t> x16(static_cast<std::size_t>(m * padded_k), 0);
  std::size_t call = 0;
  for (auto _ : state) {
    const void* packed_now = copies[call++ % copies.size()].get();
    if (bf16) {
      for (int64_t r = 0; r < m; ++r) {
        cpu::f32_to_bf16_n(x.data() + r * shape.in, shape.in, x16.data() + r * padded_k);
      }
      cpu::fixed_order_gemm_bf16(static_cast<const uint16_t*>(packed_now), shape.out, shape.in,
                                 x16.data(), m, nullptr, y.data(), threads);
    } else {
      cpu::fixed_order_gemm_f32(static_cast<const float*>(packed_now), shape.out, shape.in,
                                x.data(), m, nullptr, y.data(), threads);
    }
    benchmark::DoNotOptimize(y.data());
  }
  set_counters(state, 2.0 * m * shape.in * shape.out);
}

/// Construction of a Linear (weights reorder; fast = 1 also the probe, forced to run).
void BM_Linear_Construct(benchmark::State& state) {
  const bool bf16 = state.range(0) != 0;
  const LinearShape shape = linear_shape(state.range(1));
  const void* weights = linear_weights(state.range(1), bf16);
  LinearOptions options = fast_options(state.range(2));
  options.force_probe_mismatch = options.allow_small_m_path;  // bypasses the verdict cache
  for (auto _ : state) {
    const Linear linear =
        bf16 ? Linear(static_cast<const uint16_t*>(weights), shape.out, shape.in, nullptr, options)
             : Linear(static_cast<const float*>(weights), shape.out, shape.in, nullptr, options);
    benchmark::DoNotOptimize(&linear);
  }
}

/// muflow's fixed-tile algorithm with an arbitrary tile T = state.range(2): one [T, K]
/// primitive, ceil(M / T) executions, the last one zero-padded.
void BM_Linear_FixedTile(benchmark::State& state) {
  const int64_t m = state.range(0);
  const bool bf16 = state.range(1) != 0;
  if (bf16 && !onednn_bf16_matmul_available()) {
    state.SkipWithError("oneDNN has no bf16 matmul on this CPU");
    return;
  }
  const int64_t tile = state.range(2);
  const Weights& w = Weights::get();
  OneDnnMatmul matmul(bf16 ? static_cast<const void*>(w.gate16.data()) : w.gate.data(), bf16,
                      tile, kFfn, kHidden);
  dnnl::stream stream(engine());
  SplitMix64 rng(kSeed + 1);
  const std::vector<float> x = random_floats(rng, m * kHidden, -1.0f, 1.0f);
  std::vector<float> y(m * kFfn), x_pad(tile * kHidden, 0.0f), y_pad(tile * kFfn);
  for (auto _ : state) {
    for (int64_t row = 0; row < m; row += tile) {
      const int64_t rows = std::min(tile, m - row);
      if (rows == tile) {
        matmul.run(x.data() + row * kHidden, y.data() + row * kFfn, stream);
      } else {
        std::memcpy(x_pad.data(), x.data() + row * kHidden, rows * kHidden * sizeof(float));
        std::fill(x_pad.begin() + rows * kHidden, x_pad.end(), 0.0f);
        matmul.run(x_pad.data(), y_pad.data(), stream);
        std::memcpy(y.data() + row * kFfn, y_pad.data(), rows * kFfn * sizeof(float));
      }
    }
    stream.wait();
    benchmark::DoNotOptimize(y.data());
  }
  set_counters(state, 2.0 * m * kHidden * kFfn);
}

/// fast = 2: the real ExpertFfn (the fixed-order kernel where the CPU has it); 1: ExpertFfn on
/// oneDNN tiles (small-M path on when its probes pass); 0: ExpertFfn's loop rebuilt from two
/// Linears on oneDNN tiles with the small-M path off.
void BM_ExpertFfn_Muflow(benchmark::State& state) {
  const int64_t m = state.range(0);
  const bool bf16 = state.range(1) != 0;
  const int64_t fast = state.range(2);
  const Weights& w = Weights::get();
  SplitMix64 rng(kSeed + 1);
  const std::vector<float> x = random_floats(rng, m * kHidden, -1.0f, 1.0f);
  std::vector<float> y(m * kHidden);
  if (fast != 0) {
    using muflow::kernels::cpu::Bf16Compute;
    using muflow::kernels::cpu::LinearKernel;
    const LinearKernel kernel = fast == 2 ? LinearKernel::kAuto : LinearKernel::kOneDnnTiles;
    const ExpertFfn ffn = bf16 ? ExpertFfn(w.gate16.data(), w.up16.data(), w.down16.data(), kHidden,
                                           kFfn, Bf16Compute::kAuto, kernel)
                               : ExpertFfn(w.gate.data(), w.up.data(), w.down.data(), kHidden, kFfn,
                                           kernel);
    for (auto _ : state) {
      ffn.forward(x.data(), m, y.data());
      benchmark::DoNotOptimize(y.data());
    }
  } else {
    const LinearOptions off = fast_options(0);
    const Linear gate_up = bf16 ? Linear(w.gate_up16.data(), 2 * kFfn, kHidden, nullptr, off)
                                : Linear(w.gate_up.data(), 2 * kFfn, kHidden, nullptr, off);
    const Linear down = bf16 ? Linear(w.down16.data(), kHidden, kFfn, nullptr, off)
                             : Linear(w.down.data(), kHidden, kFfn, nullptr, off);
    std::vector<float> h(kLinearMTile * 2 * kFfn), a(kLinearMTile * kFfn);
    for (auto _ : state) {
      for (int64_t row = 0; row < m; row += kLinearMTile) {
        const int64_t rows = std::min<int64_t>(kLinearMTile, m - row);
        gate_up.forward(x.data() + row * kHidden, rows, h.data());
        swiglu(h.data(), rows, kFfn, a.data());
        down.forward(a.data(), rows, y.data() + row * kHidden);
      }
      benchmark::DoNotOptimize(y.data());
    }
  }
  set_counters(state, 2.0 * m * kHidden * kFfn * 3);
}

void BM_ExpertFfn_PerM(benchmark::State& state) {
  const int64_t m = state.range(0);
  const bool bf16 = state.range(1) != 0;
  if (bf16 && !onednn_bf16_matmul_available()) {
    state.SkipWithError("oneDNN has no bf16 matmul on this CPU");
    return;
  }
  const Weights& w = Weights::get();
  OneDnnMatmul gate_up(bf16 ? static_cast<const void*>(w.gate_up16.data()) : w.gate_up.data(),
                       bf16, m, 2 * kFfn, kHidden);
  OneDnnMatmul down(bf16 ? static_cast<const void*>(w.down16.data()) : w.down.data(), bf16, m,
                    kHidden, kFfn);
  dnnl::stream stream(engine());
  SplitMix64 rng(kSeed + 1);
  const std::vector<float> x = random_floats(rng, m * kHidden, -1.0f, 1.0f);
  std::vector<float> h(m * 2 * kFfn), a(m * kFfn), y(m * kHidden);
  for (auto _ : state) {
    gate_up.run(x.data(), h.data(), stream);
    stream.wait();
    swiglu(h.data(), m, kFfn, a.data());
    down.run(a.data(), y.data(), stream);
    stream.wait();
    benchmark::DoNotOptimize(y.data());
  }
  set_counters(state, 2.0 * m * kHidden * kFfn * 3);
}

constexpr int64_t kMs[] = {1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 128, 512};

void MTypeShapeFast(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "bf16", "shape", "fast"});
  for (int64_t shape : {0, 1}) {
    for (int64_t bf16 : {0, 1}) {
      for (int64_t fast : {0, 1, 2}) {
        for (int64_t m : kMs) b->Args({m, bf16, shape, fast});
      }
    }
  }
  b->Unit(benchmark::kMicrosecond);
}

void MTypeShapeThreads(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "bf16", "shape", "threads", "cold"});
  for (int64_t cold : {0, 1}) {
    for (int64_t threads : {1, 2}) {
      for (int64_t shape : {0, 1}) {
        for (int64_t bf16 : {0, 1}) {
          for (int64_t m : kMs) b->Args({m, bf16, shape, threads, cold});
        }
      }
    }
  }
  b->Unit(benchmark::kMicrosecond);
  b->UseRealTime();
}

void MTypeShape(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "bf16", "shape"});
  for (int64_t shape : {0, 1}) {
    for (int64_t bf16 : {0, 1}) {
      for (int64_t m : kMs) b->Args({m, bf16, shape});
    }
  }
  b->Unit(benchmark::kMicrosecond);
}

void MTypeFast(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "bf16", "fast"});
  for (int64_t bf16 : {0, 1}) {
    for (int64_t fast : {0, 1, 2}) {
      for (int64_t m : {1, 2, 4, 8, 16, 17, 32, 128, 512}) b->Args({m, bf16, fast});
    }
  }
  b->Unit(benchmark::kMicrosecond);
}

void MAndType(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "bf16"});
  for (int64_t bf16 : {0, 1}) {
    for (int64_t m : {1, 2, 4, 8, 16, 17, 32, 128, 512}) b->Args({m, bf16});
  }
  b->Unit(benchmark::kMicrosecond);
}

void MTypeAndTile(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "bf16", "tile"});
  for (int64_t bf16 : {0, 1}) {
    for (int64_t tile : {8, 16, 32}) {
      for (int64_t m : {1, 8, 32, 128, 512}) b->Args({m, bf16, tile});
    }
  }
  b->Unit(benchmark::kMicrosecond);
}

void TypeShapeFast(benchmark::internal::Benchmark* b) {
  b->ArgNames({"bf16", "shape", "fast"});
  for (int64_t shape : {0, 1}) {
    for (int64_t bf16 : {0, 1}) {
      for (int64_t fast : {0, 1}) b->Args({bf16, shape, fast});
    }
  }
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_Linear_Muflow)->Apply(MTypeShapeFast);
BENCHMARK(BM_Linear_PerM)->Apply(MTypeShape);
BENCHMARK(BM_FixedOrder)->Apply(MTypeShapeThreads);
BENCHMARK(BM_ExpertFfn_Muflow)->Apply(MTypeFast);
BENCHMARK(BM_ExpertFfn_PerM)->Apply(MAndType);
BENCHMARK(BM_Linear_FixedTile)->Apply(MTypeAndTile);
BENCHMARK(BM_Linear_Construct)->Apply(TypeShapeFast);

/// Prints whether the per-M baseline is batch invariant (row 0 alone vs inside M = 512):
/// the property muflow pays for.
void report_per_m_invariance() {
  const Weights& w = Weights::get();
  SplitMix64 rng(kSeed + 2);
  const std::vector<float> x = random_floats(rng, 512 * kHidden, -1.0f, 1.0f);
  for (bool bf16 : {false, true}) {
    if (bf16 && !onednn_bf16_matmul_available()) {
      std::printf("per-M oneDNN bf16: no bf16 matmul on this CPU\n");
      continue;
    }
    const void* weights = bf16 ? static_cast<const void*>(w.gate16.data()) : w.gate.data();
    int num_differ = 0;
    std::vector<float> alone(kFfn), batch(512 * kFfn);
    dnnl::stream stream(engine());
    OneDnnMatmul one(weights, bf16, 1, kFfn, kHidden);
    one.run(x.data(), alone.data(), stream);
    for (int64_t m : {8, 32, 128, 512}) {
      OneDnnMatmul many(weights, bf16, m, kFfn, kHidden);
      many.run(x.data(), batch.data(), stream);
      stream.wait();
      if (std::memcmp(alone.data(), batch.data(), kFfn * sizeof(float)) != 0) ++num_differ;
    }
    std::printf("per-M oneDNN %s: row 0 alone vs in M={8,32,128,512}: %d of 4 differ bitwise\n",
                bf16 ? "bf16" : "f32", num_differ);
  }
}

}  // namespace

int main(int argc, char** argv) {
  omp_set_num_threads(1);  // baselines single-threaded like Linear (which enforces it itself)
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::printf("kLinearMTile = %lld, seed = %llu\n", static_cast<long long>(kLinearMTile),
              static_cast<unsigned long long>(kSeed));
  report_per_m_invariance();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
