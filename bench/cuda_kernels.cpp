// The cuda backend's kernels on the GPU (issue #20), side by side in one run:
//  1. grouped expert GEMM (kernels/cuda/gemm.hpp, all experts of a block in one launch) vs
//     cuBLAS's dense GEMM of the same total FLOPs (cublasGemmEx, bf16 in, f32 accumulate and
//     out) and vs the GPU's bf16 dense peak, on Mixtral-8x7B's gate|up shape (8 experts,
//     [2·14336, 4096]) at 1..4096 tokens per expert;
//  2. a decode step at batch 1 (attention at a 128-token context + router + the token's two
//     experts) on one Mixtral-8x7B-sized layer with synthetic bf16 weights: the kernels' time
//     (CUDA events) vs the HBM bound (the weight bytes the step reads / the copy bandwidth
//     measured here), and the executor's wall time per stage (uploads, launches, downloads,
//     synchronization) minus its kernels' time: the per-stage overhead.
// Each result is printed, and appended to --csv as soon as it is measured.
// Usage: cuda_kernels [--csv FILE] [--quick] [--decode-only | --gemm-only]
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/exec/cuda_executor.hpp"
#include "engine/exec/cuda_model.hpp"
#include "engine/model/synthetic_model.hpp"
#include "engine/serving/kv_cache.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/device_info.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/rms_norm.hpp"
#include "kernels/cuda/rope.hpp"
#include "kernels/cuda/router.hpp"
#include "kernels/cuda/swiglu.hpp"
#include "kernels/reference/test_inputs.hpp"

namespace {

namespace kc = muflow::kernels::cuda;
namespace ex = muflow::engine::exec;

constexpr double kH100Bf16PeakTflops = 989.5;  // H100 SXM datasheet, dense (no sparsity)

struct Csv {
  std::ofstream f;
  void row(const std::string& line) {
    std::printf("%s\n", line.c_str());
    if (f.is_open()) {
      f << line << "\n";
      f.flush();
    }
  }
};

// A device buffer of `count` bf16 values uniform in [-1/64, 1/64) (kernels/reference's seeded
// generator: finite, non-trivial data), filled from the host in 64 Mi-value chunks.
kc::DeviceBuffer device_random_bf16(size_t count, uint64_t seed) {
  kc::DeviceBuffer b;
  MUFLOW_CUDA_ASSERT(b.allocate(count * 2));
  muflow::kernels::reference::SplitMix64 rng(seed);
  for (size_t off = 0; off < count;) {
    const auto n = static_cast<int64_t>(std::min<size_t>(count - off, size_t{1} << 26));
    const std::vector<uint16_t> chunk =
        muflow::kernels::reference::random_bf16(rng, n, -1.f / 64, 1.f / 64);
    MUFLOW_CUDA_ASSERT(
        cudaMemcpy(b.as<uint16_t>() + off, chunk.data(), chunk.size() * 2, cudaMemcpyHostToDevice));
    off += chunk.size();
  }
  return b;
}

template <typename F>
double time_ms(F&& f, int reps, cudaStream_t stream) {
  cudaEvent_t a, b;
  MUFLOW_CUDA_ASSERT(cudaEventCreate(&a));
  MUFLOW_CUDA_ASSERT(cudaEventCreate(&b));
  f();  // warm-up
  f();
  MUFLOW_CUDA_ASSERT(cudaEventRecord(a, stream));
  for (int i = 0; i < reps; ++i) f();
  MUFLOW_CUDA_ASSERT(cudaEventRecord(b, stream));
  MUFLOW_CUDA_ASSERT(cudaEventSynchronize(b));
  float ms = 0.f;
  MUFLOW_CUDA_ASSERT(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / reps;
}

// Device-to-device copy bandwidth (bytes read + written per second) over 2 GiB.
double copy_bandwidth(cudaStream_t stream) {
  const size_t bytes = size_t{1} << 31;
  kc::DeviceBuffer src, dst;
  MUFLOW_CUDA_ASSERT(src.allocate(bytes));
  MUFLOW_CUDA_ASSERT(dst.allocate(bytes));
  MUFLOW_CUDA_ASSERT(cudaMemset(src.get(), 1, bytes));
  const double ms = time_ms(
      [&] {
        MUFLOW_CUDA_ASSERT(
            cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream));
      },
      10, stream);
  return 2.0 * static_cast<double>(bytes) / (ms * 1e-3);
}

void grouped_gemm_vs_cublas(Csv& csv, bool quick, cudaStream_t stream) {
  const int64_t E = 8, K = 4096, N = 2 * 14336;
  std::vector<kc::DeviceBuffer> w;
  for (int64_t e = 0; e < E; ++e) w.push_back(device_random_bf16(N * K, 11 + e));
  const int64_t max_t = quick ? 512 : 4096;
  kc::DeviceBuffer x = device_random_bf16(E * max_t * K, 7);
  kc::DeviceBuffer c;
  MUFLOW_CUDA_ASSERT(c.allocate(E * max_t * N * sizeof(float)));
  kc::DeviceBuffer wall = device_random_bf16(N * K, 99);  // cuBLAS: one dense [N, K] weight
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cuda_kernels: cublasCreate failed\n");
    std::exit(1);
  }
  cublasSetStream(h, stream);
  csv.row(
      "section,tokens_per_expert,experts,n,k,grouped_tflops,dense_muflow_tflops,cublas_tflops,"
      "grouped_vs_cublas,grouped_vs_peak");
  for (int64_t t : {1, 16, 64, 256, 512, 1024, 2048, 4096}) {
    if (t > max_t) break;
    std::vector<kc::GemmGroup> groups;
    for (int64_t e = 0; e < E; ++e) {
      groups.push_back({x.as<uint16_t>() + e * t * K, w[e].get(), c.as<float>() + e * t * N, t});
    }
    const kc::GroupedGemmPlan plan = kc::GroupedGemmPlan::make(groups, true);
    std::vector<unsigned char> packed(plan.bytes());
    plan.pack(packed.data());
    kc::DeviceBuffer dpacked;
    MUFLOW_CUDA_ASSERT(dpacked.allocate(packed.size()));
    MUFLOW_CUDA_ASSERT(
        cudaMemcpy(dpacked.get(), packed.data(), packed.size(), cudaMemcpyHostToDevice));
    const double flops = 2.0 * static_cast<double>(E * t) * N * K;
    const int reps = t >= 1024 ? 3 : 10;
    const double g_ms =
        time_ms([&] { kc::grouped_gemm_bf16(plan, dpacked.get(), N, K, stream); }, reps, stream);
    const double d_ms = time_ms(
        [&] {
          kc::gemm_bf16(x.as<uint16_t>(), K, wall.as<uint16_t>(), K, nullptr, c.as<float>(), N,
                        E * t, N, K, stream);
        },
        reps, stream);
    const float alpha = 1.f, beta = 0.f;
    // Column-major cuBLAS: C^T [N, M] = W [N, K] (row-major = col-major [K, N], transposed) · X^T.
    const double b_ms = time_ms(
        [&] {
          cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(E * t),
                       static_cast<int>(K), &alpha, wall.get(), CUDA_R_16BF, static_cast<int>(K),
                       x.get(), CUDA_R_16BF, static_cast<int>(K), &beta, c.get(), CUDA_R_32F,
                       static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        },
        reps, stream);
    const double g = flops / (g_ms * 1e9), d = flops / (d_ms * 1e9), b = flops / (b_ms * 1e9);
    csv.row(absl::StrFormat("grouped_gemm,%d,%d,%d,%d,%.1f,%.1f,%.1f,%.3f,%.3f", t, E, N, K, g, d,
                            b, g / b, g / kH100Bf16PeakTflops));
  }
  cublasDestroy(h);
}

void decode_step(Csv& csv, bool quick, cudaStream_t stream) {
  muflow::engine::model::ModelConfig c;
  c.model_type = muflow::engine::model::ModelType::kMixtral;
  c.vocab_size = 1024;  // the LM head is not part of the step measured
  c.hidden_size = 4096;
  c.num_layers = 1;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.num_experts = 8;
  c.num_topk = 2;
  c.expert_ffn = quick ? 3584 : 14336;
  c.rope_theta = 1e6f;
  std::printf("# building a synthetic bf16 layer of Mixtral-8x7B shape (ffn %lld)...\n",
              (long long)c.expert_ffn);
  std::fflush(stdout);
  const auto weights =
      muflow::engine::model::make_synthetic_model(c, 5, muflow::engine::model::DType::kBF16);
  auto model = ex::CudaModel::prepare(weights, 0);
  if (!model.ok()) {
    std::fprintf(stderr, "cuda_kernels: %s\n", std::string(model.status().message()).c_str());
    std::exit(1);
  }
  const double bw = copy_bandwidth(stream);
  const int64_t H = c.hidden_size, qd = c.num_heads * c.head_dim, kvd = c.num_kv_heads * c.head_dim;
  const double attn_bytes =
      2.0 * (static_cast<double>(qd + 2 * kvd) * H + static_cast<double>(H) * qd) +
      4.0 * c.num_experts * H;
  const double expert_bytes = 2.0 * 3.0 * static_cast<double>(c.expert_ffn) * H;
  const double step_bytes = attn_bytes + 2 * expert_bytes;
  // The executor path: prefill 128 positions, then time decode steps at positions 128.. .
  ex::CudaExecutor exec(*model);
  muflow::engine::serving::KvCache kv(kvd);
  const int64_t ctx = 128;
  std::vector<muflow::engine::dataflow::TokenMeta> prefill;
  for (int64_t p = 0; p < ctx; ++p) prefill.push_back({.request_id = 1, .position = p});
  std::vector<float> h(ctx * H, 0.01f), x(ctx * H), w(ctx * 2), y(H);
  std::vector<int32_t> ids(ctx * 2);
  double unused = 0;
  if (absl::Status s = exec.attention(0, kv, prefill, h.data(),
                                      {x.data(), ids.data(), w.data(), nullptr}, &unused);
      !s.ok()) {
    std::fprintf(stderr, "cuda_kernels: prefill: %s\n", std::string(s.message()).c_str());
    std::exit(1);
  }
  const int steps = quick ? 20 : 100;
  double attn_wall = 0, expert_wall = 0;
  for (int i = 0; i < steps; ++i) {
    std::vector<muflow::engine::dataflow::TokenMeta> one = {{.request_id = 1, .position = ctx + i}};
    const auto t0 = std::chrono::steady_clock::now();
    if (absl::Status s = exec.attention(0, kv, one, h.data(),
                                        {x.data(), ids.data(), w.data(), nullptr}, &unused);
        !s.ok()) {
      std::fprintf(stderr, "cuda_kernels: decode: %s\n", std::string(s.message()).c_str());
      std::exit(1);
    }
    const auto t1 = std::chrono::steady_clock::now();
    exec.expert(0, ids[0], x.data(), 1, y.data(), &unused);
    exec.expert(0, ids[1], x.data(), 1, y.data(), &unused);
    const auto t2 = std::chrono::steady_clock::now();
    attn_wall += std::chrono::duration<double>(t1 - t0).count();
    expert_wall += std::chrono::duration<double>(t2 - t1).count();
  }
  attn_wall /= steps;
  expert_wall /= steps / 1.0;
  // The same kernels on device buffers, timed by events (no copies, no synchronization).
  ex::CudaScratch scratch;
  const ex::CudaModel::Block& blk = (*model)->block(0);
  auto buf = [&](int slot, size_t bytes) { return *scratch.get(slot, bytes); };
  auto* dh = static_cast<float*>(buf(0, H * 4));
  auto* dn = static_cast<float*>(buf(1, H * 4));
  auto* dqkv = static_cast<float*>(buf(2, (qd + 2 * kvd) * 4));
  auto* da = static_cast<float*>(buf(3, qd * 4));
  auto* dp = static_cast<float*>(buf(4, H * 4));
  auto* dl = static_cast<float*>(buf(5, c.num_experts * 4));
  auto* di = static_cast<int32_t*>(buf(6, 2 * 4));
  auto* dw = static_cast<float*>(buf(7, 2 * 4));
  auto* dy = static_cast<float*>(buf(8, H * 4));
  auto* dpos = static_cast<int64_t*>(buf(9, 8));
  // A page table over a pool of ctx + 1 positions (contents: whatever the pool holds).
  const int64_t pages = (ctx + 1 + kc::kKvPageTokens - 1) / kc::kKvPageTokens;
  kc::DeviceBuffer pool;
  MUFLOW_CUDA_ASSERT(pool.allocate(pages * kc::kv_page_floats(kvd) * 4));
  MUFLOW_CUDA_ASSERT(cudaMemset(pool.get(), 0, pool.bytes()));
  std::vector<int32_t> meta = {0, 0, 0, static_cast<int32_t>(ctx + 1)};  // page, slot, start, len
  for (int64_t p = 0; p < pages; ++p) meta.push_back(static_cast<int32_t>(p));
  auto* dmeta = static_cast<int32_t*>(buf(10, meta.size() * 4));
  MUFLOW_CUDA_ASSERT(cudaMemcpy(dmeta, meta.data(), meta.size() * 4, cudaMemcpyHostToDevice));
  MUFLOW_CUDA_ASSERT(cudaMemset(dh, 0, H * 4));
  MUFLOW_CUDA_ASSERT(cudaMemset(dpos, 0, 8));
  const int W = static_cast<int>(qd + 2 * kvd);
  const double attn_ms = time_ms(
      [&] {
        kc::rms_norm(dh, blk.input_norm.as<float>(), 1, H, 1e-5f, dn, stream);
        (void)(*model)->linear(blk.qkv, nullptr, dn, 1, dqkv, scratch, 12, stream);
        kc::rope_qk(dqkv, W, dpos, 1, c.num_heads, c.num_kv_heads, c.head_dim, c.rope_theta,
                    stream);
        kc::kv_write(pool.as<float>(), kvd, dqkv, W, qd, dmeta, dmeta + 1, 1, stream);
        kc::paged_attention(dqkv, W, pool.as<float>(), dmeta + 4, dmeta + 2, dmeta + 3, 1,
                            c.num_heads, c.num_kv_heads, c.head_dim, da, stream);
        (void)(*model)->linear(blk.o, nullptr, da, 1, dp, scratch, 12, stream);
        kc::add_inplace(dh, dp, H, stream);
        kc::rms_norm(dh, blk.post_attn_norm.as<float>(), 1, H, 1e-5f, dn, stream);
        (void)(*model)->linear(blk.router, nullptr, dn, 1, dl, scratch, 12, stream);
        kc::router_topk(dl, 1, c.num_experts, 2, true, di, dw, stream);
      },
      steps, stream);
  const double expert_ms = time_ms(
      [&] {
        (void)(*model)->expert(0, 0, dn, 1, dy, scratch, stream);
        (void)(*model)->expert(0, 1, dn, 1, dy, scratch, stream);
      },
      steps, stream);
  // Each op of the step alone (the same buffers), to see where the time goes.
  {
    const ex::CudaMatrix& gate_up_w = blk.gate_up[0];
    const ex::CudaMatrix& down_w = blk.down[0];
    auto* dg = static_cast<float*>(buf(11, 2 * c.expert_ffn * 4));
    auto* dact = static_cast<uint16_t*>(buf(16, c.expert_ffn * 2));  // not a model slot
    auto* dxb = static_cast<uint16_t*>(buf(17, H * 2));
    kc::round_to_bf16(dn, H, dxb, stream);
    struct Op {
      const char* name;
      std::function<void()> run;
    };
    const std::vector<Op> ops = {
        {"input_norm",
         [&] { kc::rms_norm(dh, blk.input_norm.as<float>(), 1, H, 1e-5f, dn, stream); }},
        {"qkv_gemm",
         [&] { (void)(*model)->linear(blk.qkv, nullptr, dn, 1, dqkv, scratch, 12, stream); }},
        {"rope",
         [&] {
           kc::rope_qk(dqkv, W, dpos, 1, c.num_heads, c.num_kv_heads, c.head_dim, c.rope_theta,
                       stream);
         }},
        {"kv_write",
         [&] { kc::kv_write(pool.as<float>(), kvd, dqkv, W, qd, dmeta, dmeta + 1, 1, stream); }},
        {"paged_attention",
         [&] {
           kc::paged_attention(dqkv, W, pool.as<float>(), dmeta + 4, dmeta + 2, dmeta + 3, 1,
                               c.num_heads, c.num_kv_heads, c.head_dim, da, stream);
         }},
        {"o_gemm", [&] { (void)(*model)->linear(blk.o, nullptr, da, 1, dp, scratch, 12, stream); }},
        {"residual_add", [&] { kc::add_inplace(dh, dp, H, stream); }},
        {"router_gemm_f32",
         [&] { (void)(*model)->linear(blk.router, nullptr, dn, 1, dl, scratch, 12, stream); }},
        {"router_topk", [&] { kc::router_topk(dl, 1, c.num_experts, 2, true, di, dw, stream); }},
        {"expert_gate_up_gemm",
         [&] {
           kc::gemm_bf16(dxb, H, gate_up_w.data.as<uint16_t>(), H, nullptr, dg, 2 * c.expert_ffn, 1,
                         2 * c.expert_ffn, H, stream);
         }},
        {"expert_swiglu", [&] { kc::swiglu(dg, 1, c.expert_ffn, nullptr, dact, stream); }},
        {"expert_down_gemm",
         [&] {
           kc::gemm_bf16(dact, c.expert_ffn, down_w.data.as<uint16_t>(), c.expert_ffn, nullptr, dy,
                         H, 1, H, c.expert_ffn, stream);
         }},
    };
    csv.row("section,op,us");
    for (const Op& op : ops) {
      csv.row(absl::StrFormat("decode_op,%s,%.1f", op.name, time_ms(op.run, steps, stream) * 1e3));
    }
  }
  const double kernels_us = (attn_ms + expert_ms) * 1e3;
  const double bound_us = step_bytes / bw * 1e6;
  csv.row(
      "section,ffn,weight_bytes,copy_bw_gbs,hbm_bound_us,kernels_us,kernels_vs_bound,"
      "attn_kernels_us,experts_kernels_us,attn_stage_wall_us,expert_stages_wall_us,"
      "attn_stage_overhead_us,expert_stage_overhead_us");
  csv.row(absl::StrFormat("decode_step,%d,%.0f,%.0f,%.1f,%.1f,%.2f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f",
                          c.expert_ffn, step_bytes, bw / 1e9, bound_us, kernels_us,
                          kernels_us / bound_us, attn_ms * 1e3, expert_ms * 1e3, attn_wall * 1e6,
                          expert_wall * 1e6, attn_wall * 1e6 - attn_ms * 1e3,
                          (expert_wall * 1e6 - expert_ms * 1e3) / 2.0));
}

}  // namespace

int main(int argc, char** argv) {
  Csv csv;
  bool quick = false, decode_only = false, gemm_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--csv" && i + 1 < argc) {
      csv.f.open(argv[++i]);
      if (!csv.f) {
        std::fprintf(stderr, "cuda_kernels: cannot write %s\n", argv[i]);
        return 2;
      }
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--decode-only") {
      decode_only = true;
    } else if (a == "--gemm-only") {
      gemm_only = true;
    } else {
      std::fprintf(stderr,
                   "usage: cuda_kernels [--csv FILE] [--quick] [--decode-only | --gemm-only]\n");
      return 2;
    }
  }
  if (decode_only && gemm_only) {
    std::fprintf(stderr, "cuda_kernels: --decode-only and --gemm-only exclude each other\n");
    return 2;
  }
  std::string why;
  if (kc::device_count(&why) == 0) {
    std::fprintf(stderr, "cuda_kernels: no CUDA device (%s)\n", why.c_str());
    return 1;
  }
  std::printf("# device: %s\n", kc::device_description(0).c_str());
  cudaStream_t stream;
  MUFLOW_CUDA_ASSERT(cudaStreamCreate(&stream));
  if (!decode_only) grouped_gemm_vs_cublas(csv, quick, stream);
  if (!gemm_only) decode_step(csv, quick, stream);
  cudaStreamDestroy(stream);
  return 0;
}
