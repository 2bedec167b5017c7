// The cuda kernels (kernels/cuda/) against kernels/reference, and their batch invariance
// (kernels/README.md): a row's bits never depend on the batch it ran in. Needs a GPU; skips
// with a message elsewhere. Tolerances per op are stated where they are checked:
//   gemm_f32      bitwise a plain std::fma chain over k ascending from +0, bias last (both
//                 its kernels: narrow weights, N ≤ 16, and tiles)
//   gemm_bf16     1e-5 · Σ_k |x_k·w_k| · max(1, K/256) (+|bias|) against the bf16 reference
//   rms_norm      4e-6 · |ref| + 1e-7        rope      2e-6 · (|x_i| + |x_{i+d/2}|) + 1e-7
//   swiglu        2e-6 · |ref| + 1e-30       router    ids equal; weights 2e-6 · w
//   attention     2e-5 · max|v| + 1e-7
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "gpu_test_support.hpp"
#include "kernels/cpu/bf16.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/rms_norm.hpp"
#include "kernels/cuda/rope.hpp"
#include "kernels/cuda/router.hpp"
#include "kernels/cuda/swiglu.hpp"
#include "kernels/reference/attention.hpp"
#include "kernels/reference/expert_ffn.hpp"
#include "kernels/reference/linear.hpp"
#include "kernels/reference/rms_norm.hpp"
#include "kernels/reference/rope.hpp"
#include "kernels/reference/router.hpp"
#include "kernels/reference/test_inputs.hpp"

namespace muflow {
namespace {

namespace kc = kernels::cuda;
namespace ref = kernels::reference;
using kernels::cpu::bf16_to_f32;
using kernels::cpu::f32_to_bf16;
using testing::download;
using testing::upload;
using testing::zeros;

std::vector<float> fma_chain(const std::vector<float>& a, int64_t lda, const std::vector<float>& w,
                             int64_t ldw, const std::vector<float>& bias, int64_t m, int64_t n,
                             int64_t k) {
  std::vector<float> c(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.f;
      for (int64_t q = 0; q < k; ++q) acc = std::fma(a[i * lda + q], w[j * ldw + q], acc);
      c[i * n + j] = bias.empty() ? acc : acc + bias[j];
    }
  }
  return c;
}

TEST(CudaGemm, F32IsBitwiseTheFmaChainOfTheCpuFixedOrderGemm) {
  MUFLOW_REQUIRE_GPU();
  ref::SplitMix64 rng(ref::test_seed("CudaGemm.F32", 101));
  struct Shape {
    int64_t m, n, k, pad;
    bool bias;
  };
  for (const Shape s :
       {Shape{1, 1, 1, 0, false}, Shape{5, 70, 33, 3, true}, Shape{100, 130, 257, 0, true},
        Shape{64, 64, 16, 0, false}, Shape{67, 9, 200, 5, true}, Shape{1, 8, 4096, 0, false},
        Shape{300, 16, 1000, 7, true}, Shape{33, 17, 777, 0, true}, Shape{5, 12, 1003, 1, true},
        Shape{300, 16, 1000, 0, true}, Shape{3, 8, 6, 0, true}, Shape{2, 3, 13, 2, false}}) {
    const int64_t lda = s.k + s.pad, ldw = s.k + s.pad;
    std::vector<float> a = ref::random_floats(rng, s.m * lda, -1.f, 1.f);
    std::vector<float> w = ref::random_floats(rng, s.n * ldw, -1.f, 1.f);
    std::vector<float> bias =
        s.bias ? ref::random_floats(rng, s.n, -1.f, 1.f) : std::vector<float>{};
    auto da = upload(a), dw = upload(w), db = upload(bias);
    auto dc = zeros<float>(s.m * s.n);
    kc::gemm_f32(da.as<float>(), lda, dw.as<float>(), ldw, s.bias ? db.as<float>() : nullptr,
                 dc.as<float>(), s.n, s.m, s.n, s.k, nullptr);
    const std::vector<float> got = download<float>(dc, s.m * s.n);
    const std::vector<float> want = fma_chain(a, lda, w, ldw, bias, s.m, s.n, s.k);
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
        << "m " << s.m << " n " << s.n << " k " << s.k;
  }
}

TEST(CudaGemm, Bf16MatchesTheReferenceWithinTolerance) {
  MUFLOW_REQUIRE_GPU();
  ref::SplitMix64 rng(ref::test_seed("CudaGemm.Bf16", 102));
  struct Shape {
    int64_t m, n, k;
  };
  // The decode kernels (m ≤ 8, m ≤ 16; 8,200 columns: their wide configuration) with columns
  // that end mid-warp, K tails of half a chunk (2056, 264) and of 6.5 chunks (1000) in their
  // 128-k stages, Ks that wrap their stage rings several times; the tile kernels; K = 0 on
  // the sm_90 kernel (C is the bias: no k tile to load or multiply), and 306 of its tiles
  // with a bias (more tiles than SMs: a block's later tiles add the bias too).
  for (const Shape s : {Shape{1, 8, 8}, Shape{3, 130, 64}, Shape{5, 61, 2056}, Shape{12, 37, 1000},
                        Shape{3, 8200, 264}, Shape{33, 200, 136}, Shape{129, 257, 512},
                        Shape{300, 128, 256}, Shape{200, 300, 0}, Shape{2304, 4100, 64}}) {
    std::vector<float> x = ref::random_floats(rng, s.m * s.k, -2.f, 2.f);
    std::vector<uint16_t> xb(x.size());
    for (size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]);
    std::vector<uint16_t> w = ref::random_bf16(rng, s.n * s.k, -1.f, 1.f);
    std::vector<float> bias = ref::random_floats(rng, s.n, -1.f, 1.f);
    auto dx = upload(xb), dw = upload(w), db = upload(bias);
    auto dc = zeros<float>(s.m * s.n);
    kc::gemm_bf16(dx.as<uint16_t>(), s.k, dw.as<uint16_t>(), s.k, db.as<float>(), dc.as<float>(),
                  s.n, s.m, s.n, s.k, nullptr);
    const std::vector<float> got = download<float>(dc, s.m * s.n);
    std::vector<float> want(s.m * s.n);
    ref::linear_bf16(x.data(), w.data(), bias.data(), s.m, s.n, s.k, want.data());
    const double scale = std::max(1.0, static_cast<double>(s.k) / 256.0);
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        double mag = std::fabs(bias[j]);
        for (int64_t q = 0; q < s.k; ++q) {
          mag += std::fabs(static_cast<double>(bf16_to_f32(xb[i * s.k + q])) *
                           bf16_to_f32(w[j * s.k + q]));
        }
        ASSERT_NEAR(got[i * s.n + j], want[i * s.n + j], 1e-5 * mag * scale + 1e-7)
            << "m " << s.m << " n " << s.n << " k " << s.k << " at (" << i << ", " << j << ")";
      }
    }
  }
}

// Row r of a batch of M rows starting at row `start` of the same inputs must equal, bitwise,
// row start + r of one 512-row run: batches of 1..33, 64, 100 and 512 rows (every tile height
// of the bf16 kernels: 8 and 16 rows streamed by warps, 64 and 128 by tiles, the 128-row ones
// by warpgroup MMAs on sm_90), at several offsets; 140 columns end mid-warp and mid-tile,
// k = 264 ends mid-chunk.
// `count` seeded values in [lo, hi): bf16 bits (In = uint16_t) or f32.
template <typename In>
std::vector<In> random_values(ref::SplitMix64& rng, int64_t count, float lo, float hi) {
  if constexpr (sizeof(In) == 2) {
    return ref::random_bf16(rng, count, lo, hi);
  } else {
    return ref::random_floats(rng, count, lo, hi);
  }
}

template <typename In>
void expect_batch_invariant(bool bf16, int64_t rows = 512, int64_t n = 140,
                            int64_t max_small = 33) {
  ref::SplitMix64 rng(
      ref::test_seed(bf16 ? "CudaGemm.Bf16Invariance" : "CudaGemm.F32Invariance", 103));
  const int64_t k = 264;
  const std::vector<In> x = random_values<In>(rng, rows * k, -2.f, 2.f);
  const std::vector<In> w = random_values<In>(rng, n * k, -1.f, 1.f);
  auto dx = upload(x), dw = upload(w);
  auto run = [&](int64_t start, int64_t m) {
    auto dc = zeros<float>(m * n);
    if constexpr (sizeof(In) == 2) {
      kc::gemm_bf16(dx.template as<uint16_t>() + start * k, k, dw.template as<uint16_t>(), k,
                    nullptr, dc.as<float>(), n, m, n, k, nullptr);
    } else {
      kc::gemm_f32(dx.template as<float>() + start * k, k, dw.template as<float>(), k, nullptr,
                   dc.as<float>(), n, m, n, k, nullptr);
    }
    return download<float>(dc, m * n);
  };
  const std::vector<float> all = run(0, rows);
  std::vector<int64_t> sizes(max_small);
  std::iota(sizes.begin(), sizes.end(), 1);
  for (int64_t m : {int64_t{64}, int64_t{100}, rows}) {
    if (m <= rows && m > max_small) sizes.push_back(m);
  }
  for (int64_t m : sizes) {
    for (int64_t start : {int64_t{0}, rows - m, (rows - m) / 3}) {
      const std::vector<float> part = run(start, m);
      ASSERT_EQ(0, std::memcmp(part.data(), all.data() + start * n, part.size() * sizeof(float)))
          << (bf16 ? "bf16" : "f32") << ": batch of " << m << " rows at " << start;
    }
  }
}

TEST(CudaGemm, Bf16RowsAreBatchInvariant) {
  MUFLOW_REQUIRE_GPU();
  expect_batch_invariant<uint16_t>(true);
  // 8,200 columns: the decode kernel's wide configuration (from 8,192 columns) at 1..17 rows.
  expect_batch_invariant<uint16_t>(true, 128, 8200, 17);
  // 2,304 rows × 4,100 columns: 18 × 17 tiles of the sm_90 kernel, more than one per SM, so
  // its blocks carry their stages from tile to tile, and a band of 16 row tiles then one of 2.
  expect_batch_invariant<uint16_t>(true, 2304, 4100, 9);
}

TEST(CudaGemm, F32RowsAreBatchInvariant) {
  MUFLOW_REQUIRE_GPU();
  expect_batch_invariant<float>(false);
}

// One launch over groups of `ms` rows (each with its own weights) gives each group bitwise
// what the dense GEMM gives it alone (whose tile height its own m picks).
template <typename In>
void expect_grouped_equals_dense(bool bf16, const std::vector<int64_t>& ms, int64_t n = 200) {
  ref::SplitMix64 rng(ref::test_seed("CudaGemm.Grouped", 104));
  const int64_t k = 72;
  std::vector<kernels::cuda::DeviceBuffer> xs, ws, cs;
  std::vector<kc::GemmGroup> groups;
  for (int64_t m : ms) {
    const std::vector<In> x = random_values<In>(rng, m * k, -2.f, 2.f);
    const std::vector<In> w = random_values<In>(rng, n * k, -1.f, 1.f);
    xs.push_back(upload(x));
    ws.push_back(upload(w));
    cs.push_back(zeros<float>(std::max<int64_t>(1, m) * n));
    groups.push_back({xs.back().get(), ws.back().get(), cs.back().as<float>(), m});
  }
  const kc::GroupedGemmPlan plan = kc::GroupedGemmPlan::make(groups, bf16);
  std::vector<unsigned char> packed(plan.bytes());
  plan.pack(packed.data());
  auto dpacked = upload(packed);
  if (bf16) {
    kc::grouped_gemm_bf16(plan, dpacked.get(), n, k, nullptr);
  } else {
    kc::grouped_gemm_f32(plan, dpacked.get(), n, k, nullptr);
  }
  for (size_t g = 0; g < ms.size(); ++g) {
    const int64_t m = ms[g];
    const std::vector<float> got = download<float>(cs[g], m * n);
    auto dc = zeros<float>(std::max<int64_t>(1, m) * n);
    if (bf16) {
      kc::gemm_bf16(xs[g].as<uint16_t>(), k, ws[g].as<uint16_t>(), k, nullptr, dc.as<float>(), n, m,
                    n, k, nullptr);
    } else {
      kc::gemm_f32(xs[g].as<float>(), k, ws[g].as<float>(), k, nullptr, dc.as<float>(), n, m, n, k,
                   nullptr);
    }
    const std::vector<float> want = download<float>(dc, m * n);
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
        << (bf16 ? "bf16" : "f32") << " group " << g << " (" << m << " rows)";
  }
}

TEST(CudaGemm, GroupedBf16EqualsDenseBitwise) {
  MUFLOW_REQUIRE_GPU();
  // Mean rows 43.5 (64-row tiles), 2.75 (8-row decode tiles), 14.25 (16-row decode tiles),
  // 133 (128-row tiles: warpgroup MMAs on sm_90); the plan rounds the mean up.
  for (const std::vector<int64_t>& ms : std::vector<std::vector<int64_t>>{
           {0, 3, 40, 1, 130}, {1, 2, 0, 5, 3}, {12, 9, 16, 0, 20}, {200, 0, 70, 129}}) {
    expect_grouped_equals_dense<uint16_t>(true, ms);
  }
  // 29 row tiles of 128 (groups of 700, 1,500, 333, 900 rows) × 6 column tiles: more tiles
  // than SMs, bands across group boundaries.
  expect_grouped_equals_dense<uint16_t>(true, {700, 0, 1500, 333, 900}, 1300);
}

TEST(CudaGemm, GroupedF32EqualsDenseBitwise) {
  MUFLOW_REQUIRE_GPU();
  expect_grouped_equals_dense<float>(false, {0, 3, 40, 1, 130});
}

// The plan alone (host only, no GPU): each group's first row tile, the tile count, and the tile
// height from the mean rows of the non-empty groups: 8 or 16 (the decode kernel), 64 or 128.
TEST(CudaGemm, GroupedPlanTilesEachGroupAtTheHeightItsMeanRowsPick) {
  auto plan = [](const std::vector<int64_t>& ms, bool bf16) {
    std::vector<kc::GemmGroup> groups;
    for (int64_t m : ms) groups.push_back({nullptr, nullptr, nullptr, m});
    return kc::GroupedGemmPlan::make(groups, bf16);
  };
  struct Case {
    std::vector<int64_t> ms;
    int32_t tile_rows;
    std::vector<int32_t> tile_start;
  };
  for (const Case& c :
       std::vector<Case>{{{1, 2, 0, 5, 3}, 8, {0, 1, 2, 2, 3, 4}},      // mean 2.75
                         {{12, 9, 16, 0, 20}, 16, {0, 1, 2, 3, 3, 5}},  // mean 14.25
                         {{0, 3, 40, 1, 130}, 64, {0, 0, 1, 2, 3, 6}},  // mean 43.5
                         {{200, 0, 70, 129}, 128, {0, 2, 2, 3, 5}},     // mean 133
                         {{0, 0}, 8, {0, 0, 0}}}) {                     // nothing to run
    const kc::GroupedGemmPlan p = plan(c.ms, true);
    EXPECT_EQ(p.tile_rows, c.tile_rows) << "first group " << c.ms[0];
    EXPECT_EQ(p.tile_start, c.tile_start) << "first group " << c.ms[0];
    EXPECT_EQ(p.total_tiles, c.tile_start.back());
    EXPECT_EQ(p.bytes(), c.ms.size() * sizeof(kc::GemmGroup) + c.tile_start.size() * 4);
  }
  // f32 plans always take the f32 kernel's 64-row tiles.
  EXPECT_EQ(plan({1, 2, 3}, false).tile_rows, 64);
}

TEST(CudaOps, RmsNormMatchesReference) {
  MUFLOW_REQUIRE_GPU();
  ref::SplitMix64 rng(ref::test_seed("CudaOps.RmsNorm", 105));
  const int64_t rows = 37, dim = 300;
  std::vector<float> x = ref::random_floats(rng, rows * dim, -3.f, 3.f);
  std::vector<float> w = ref::random_floats(rng, dim, 0.5f, 1.5f);
  auto dx = upload(x), dw = upload(w);
  auto dy = zeros<float>(rows * dim);
  kc::rms_norm(dx.as<float>(), dw.as<float>(), rows, dim, 1e-5f, dy.as<float>(), nullptr);
  const std::vector<float> got = download<float>(dy, rows * dim);
  std::vector<float> want(rows * dim);
  ref::rms_norm(x.data(), w.data(), rows, dim, 1e-5f, want.data());
  for (int64_t i = 0; i < rows * dim; ++i) {
    ASSERT_NEAR(got[i], want[i], 4e-6 * std::fabs(want[i]) + 1e-7) << "element " << i;
  }
}

TEST(CudaOps, RopeRotatesQAndKHeadsAndLeavesV) {
  MUFLOW_REQUIRE_GPU();
  ref::SplitMix64 rng(ref::test_seed("CudaOps.Rope", 106));
  const int64_t rows = 9, heads = 4, kv_heads = 2, hd = 32, stride = (heads + 2 * kv_heads) * hd;
  std::vector<float> qkv = ref::random_floats(rng, rows * stride, -1.f, 1.f);
  std::vector<int64_t> pos = {0, 1, 2, 17, 100, 1000, 4095, 77777, 5};
  auto dq = upload(qkv), dp = upload(pos);
  kc::rope_qk(dq.as<float>(), stride, dp.as<int64_t>(), rows, heads, kv_heads, hd, 1e6f, nullptr);
  const std::vector<float> got = download<float>(dq, rows * stride);
  std::vector<float> want = qkv;
  for (int64_t r = 0; r < rows; ++r) {
    ref::rope_rotate_half(want.data() + r * stride, &pos[r], 1, heads + kv_heads, hd, 1e6f);
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < heads + kv_heads; ++h) {
      for (int64_t i = 0; i < hd; ++i) {
        const int64_t base = r * stride + h * hd;
        const int64_t pair = i < hd / 2 ? i + hd / 2 : i - hd / 2;
        const double tol = 2e-6 * (std::fabs(qkv[base + i]) + std::fabs(qkv[base + pair])) + 1e-7;
        ASSERT_NEAR(got[base + i], want[base + i], tol)
            << "row " << r << " head " << h << " dim " << i;
      }
    }
    // v untouched
    const int64_t v0 = r * stride + (heads + kv_heads) * hd;
    ASSERT_EQ(0, std::memcmp(got.data() + v0, qkv.data() + v0, kv_heads * hd * sizeof(float)));
  }
}

TEST(CudaOps, SwigluMatchesReferenceAndRoundsToBf16LikeTheCpu) {
  MUFLOW_REQUIRE_GPU();
  ref::SplitMix64 rng(ref::test_seed("CudaOps.Swiglu", 107));
  const int64_t rows = 13, ffn = 96;
  std::vector<float> gu = ref::random_floats(rng, rows * 2 * ffn, -6.f, 6.f);
  auto dg = upload(gu);
  auto dout = zeros<float>(rows * ffn);
  auto dbf = zeros<uint16_t>(rows * ffn);
  kc::swiglu(dg.as<float>(), rows, ffn, dout.as<float>(), dbf.as<uint16_t>(), nullptr);
  const std::vector<float> got = download<float>(dout, rows * ffn);
  const std::vector<uint16_t> got_bf = download<uint16_t>(dbf, rows * ffn);
  std::vector<float> want(rows * ffn);
  ref::swiglu(gu.data(), rows, ffn, want.data());
  for (int64_t i = 0; i < rows * ffn; ++i) {
    ASSERT_NEAR(got[i], want[i], 2e-6 * std::fabs(want[i]) + 1e-30) << "element " << i;
    ASSERT_EQ(got_bf[i], f32_to_bf16(got[i])) << "element " << i;
  }
}

TEST(CudaOps, RouterPicksTheReferenceExpertsTiesToTheLowerId) {
  MUFLOW_REQUIRE_GPU();
  ref::SplitMix64 rng(ref::test_seed("CudaOps.Router", 108));
  const int64_t rows = 200, experts = 60;
  for (int64_t k : {1, 2, 8}) {
    for (bool renorm : {true, false}) {
      std::vector<float> logits(rows * experts);
      // On a 1/32 grid over [-2, 2]: exact ties are frequent.
      for (float& v : logits) v = std::floor(rng.uniform(-64.f, 64.f)) / 32.f;
      auto dl = upload(logits);
      auto di = zeros<int32_t>(rows * k);
      auto dw = zeros<float>(rows * k);
      kc::router_topk(dl.as<float>(), rows, experts, k, renorm, di.as<int32_t>(), dw.as<float>(),
                      nullptr);
      const std::vector<int32_t> ids = download<int32_t>(di, rows * k);
      const std::vector<float> w = download<float>(dw, rows * k);
      std::vector<int32_t> want_ids(rows * k);
      std::vector<float> want_w(rows * k);
      ref::router_topk(logits.data(), rows, experts, k, renorm, want_ids.data(), want_w.data());
      for (int64_t i = 0; i < rows * k; ++i) {
        ASSERT_EQ(ids[i], want_ids[i]) << "k " << k << " element " << i;
        ASSERT_NEAR(w[i], want_w[i], 2e-6 * std::fabs(want_w[i])) << "k " << k << " element " << i;
      }
    }
  }
}

TEST(CudaOps, EmbedGatherAddAndRound) {
  MUFLOW_REQUIRE_GPU();
  ref::SplitMix64 rng(ref::test_seed("CudaOps.Elementwise", 109));
  const int64_t vocab = 50, dim = 40;
  std::vector<float> table = ref::random_floats(rng, vocab * dim, -1.f, 1.f);
  std::vector<int32_t> ids = {3, 0, 49, 3, 17};
  const int64_t rows = static_cast<int64_t>(ids.size());
  auto dt = upload(table), di = upload(ids);
  auto dh = zeros<float>(rows * dim);
  kc::embed_gather(dt.as<float>(), di.as<int32_t>(), rows, dim, dh.as<float>(), nullptr);
  std::vector<float> h = download<float>(dh, rows * dim);
  for (int64_t r = 0; r < rows; ++r) {
    ASSERT_EQ(0, std::memcmp(h.data() + r * dim, table.data() + ids[r] * dim, dim * sizeof(float)));
  }
  kc::add_inplace(dh.as<float>(), dt.as<float>(), rows * dim, nullptr);
  const std::vector<float> sum = download<float>(dh, rows * dim);
  for (int64_t i = 0; i < rows * dim; ++i) ASSERT_EQ(sum[i], h[i] + table[i]);
  std::vector<float> special = {1.0f, -0.0f,   3.14159f,      1e-40f,      INFINITY,   -INFINITY,
                                NAN,  65504.f, 3.3895314e38f, 1.00390625f, 1.01171875f};
  auto ds = upload(special);
  auto db = zeros<uint16_t>(special.size());
  kc::round_to_bf16(ds.as<float>(), static_cast<int64_t>(special.size()), db.as<uint16_t>(),
                    nullptr);
  const std::vector<uint16_t> bits = download<uint16_t>(db, special.size());
  for (size_t i = 0; i < special.size(); ++i) ASSERT_EQ(bits[i], f32_to_bf16(special[i])) << i;
}

// Rows of several requests with contexts of 1 to 1,500 positions (more than one 1,024-position
// chunk), their pages shuffled over the pool, against the reference; then each row alone
// must give bitwise what it gave in the batch.
TEST(CudaAttention, PagedAttentionMatchesReferenceAndIsBatchInvariant) {
  MUFLOW_REQUIRE_GPU();
  ref::SplitMix64 rng(ref::test_seed("CudaAttention.Paged", 110));
  const int64_t heads = 8, kv_heads = 2, hd = 64, qd = heads * hd, kvd = kv_heads * hd;
  const int64_t stride = qd + 2 * kvd;
  const std::vector<int64_t> lens = {1, 5, 16, 17, 33, 1500, 300};
  // Host copies of each request's K and V [len, kvd].
  std::vector<std::vector<float>> keys, values;
  int64_t total_pages = 0;
  for (int64_t len : lens) {
    keys.push_back(ref::random_floats(rng, len * kvd, -1.f, 1.f));
    values.push_back(ref::random_floats(rng, len * kvd, -1.f, 1.f));
    total_pages += (len + kc::kKvPageTokens - 1) / kc::kKvPageTokens;
  }
  std::vector<int32_t> perm(total_pages);
  std::iota(perm.begin(), perm.end(), 0);
  for (int64_t i = total_pages - 1; i > 0; --i) std::swap(perm[i], perm[rng.next() % (i + 1)]);
  // Write every position through kv_write: staged K|V rows [rows, 2·kvd].
  std::vector<float> stage;
  std::vector<int32_t> page, slot, table, table_start;
  int64_t next_page = 0;
  for (size_t r = 0; r < lens.size(); ++r) {
    table_start.push_back(static_cast<int32_t>(table.size()));
    const int64_t pages = (lens[r] + kc::kKvPageTokens - 1) / kc::kKvPageTokens;
    for (int64_t p = 0; p < pages; ++p) table.push_back(perm[next_page++]);
    for (int64_t t = 0; t < lens[r]; ++t) {
      stage.insert(stage.end(), keys[r].begin() + t * kvd, keys[r].begin() + (t + 1) * kvd);
      stage.insert(stage.end(), values[r].begin() + t * kvd, values[r].begin() + (t + 1) * kvd);
      page.push_back(table[table_start.back() + t / kc::kKvPageTokens]);
      slot.push_back(static_cast<int32_t>(t % kc::kKvPageTokens));
    }
  }
  auto pool = zeros<float>(total_pages * kc::kv_page_floats(kvd));
  auto dstage = upload(stage), dpage = upload(page), dslot = upload(slot);
  kc::kv_write(pool.as<float>(), kvd, dstage.as<float>(), 2 * kvd, 0, dpage.as<int32_t>(),
               dslot.as<int32_t>(), static_cast<int64_t>(page.size()), nullptr);
  // One query row per request, attending to its whole context.
  const auto rows = static_cast<int64_t>(lens.size());
  std::vector<float> qkv = ref::random_floats(rng, rows * stride, -1.f, 1.f);
  std::vector<int32_t> context(lens.begin(), lens.end());
  auto dq = upload(qkv), dtable = upload(table), dstart = upload(table_start),
       dctx = upload(context);
  auto dout = zeros<float>(rows * qd);
  kc::paged_attention(dq.as<float>(), stride, pool.as<float>(), dtable.as<int32_t>(),
                      dstart.as<int32_t>(), dctx.as<int32_t>(), rows, heads, kv_heads, hd,
                      dout.as<float>(), nullptr);
  const std::vector<float> got = download<float>(dout, rows * qd);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> want(qd);
    ref::gqa_attention(qkv.data() + r * stride, keys[r].data(), values[r].data(), lens[r], heads,
                       kv_heads, hd, want.data());
    float vmax = 0.f;
    for (float v : values[r]) vmax = std::max(vmax, std::fabs(v));
    for (int64_t i = 0; i < qd; ++i) {
      ASSERT_NEAR(got[r * qd + i], want[i], 2e-5 * vmax + 1e-7)
          << "row " << r << " (context " << lens[r] << ") element " << i;
    }
    // The same row alone.
    std::vector<int32_t> one_start = {table_start[r]}, one_ctx = {context[r]};
    auto ds1 = upload(one_start), dc1 = upload(one_ctx);
    auto dq1 = upload(std::vector<float>(qkv.begin() + r * stride, qkv.begin() + (r + 1) * stride));
    auto do1 = zeros<float>(qd);
    kc::paged_attention(dq1.as<float>(), stride, pool.as<float>(), dtable.as<int32_t>(),
                        ds1.as<int32_t>(), dc1.as<int32_t>(), 1, heads, kv_heads, hd,
                        do1.as<float>(), nullptr);
    const std::vector<float> alone = download<float>(do1, qd);
    ASSERT_EQ(0, std::memcmp(alone.data(), got.data() + r * qd, qd * sizeof(float))) << "row " << r;
  }
}

}  // namespace
}  // namespace muflow
