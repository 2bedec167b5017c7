// Batch invariance (ARCHITECTURE.md §8.1): a row's result is BITWISE the same whether it is
// computed alone or inside a batch of any size, at any position, next to any other rows.
// Checked with memcmp for Linear (f32, bf16, with bias), ExpertFfn (f32, bf16), rms_norm and
// router_topk, for batch sizes 1..33, 64, 100, 512 and several positions each; Linear and
// ExpertFfn also at EVERY position (each row of a random batch vs the same row alone). Linear
// runs as constructed by default (the fixed-order kernel where the CPU has it) and with the
// oneDNN tiles (their checked small-M fast path is on wherever its probe passes;
// whether it does depends on the CPU and the oneDNN build, so it is reported, never asserted)
// and with the fast path forced off through the probe-failure hook; the two must agree bitwise.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/expert_ffn.hpp"
#include "kernels/cpu/linear.hpp"
#include "linear_paths_report.hpp"
#include "kernels/cpu/rms_norm.hpp"
#include "kernels/cpu/router.hpp"
#include "kernels/reference/test_inputs.hpp"

namespace muflow::kernels::cpu {
namespace {

using reference::random_bf16;
using reference::random_floats;
using reference::SplitMix64;

/// 1..33 (every remainder of the 16-row tile, twice), then several tiles.
const std::vector<int64_t> kBatchSizes = [] {
  std::vector<int64_t> sizes;
  for (int64_t b = 1; b <= 33; ++b) sizes.push_back(b);
  for (int64_t b : {64, 100, 512}) sizes.push_back(b);
  return sizes;
}();

using testing_paths::report_linear_paths;

/// A property key for a Linear shape: "linear_<type>_<out>x<in>[_bias]".
std::string linear_key(const char* type, int64_t out, int64_t in, bool with_bias) {
  return std::string("linear_") + type + "_" + std::to_string(out) + "x" + std::to_string(in) +
         (with_bias ? "_bias" : "");
}

/// Positions to place the probe row at in a batch of `batch` rows: both ends, around the
/// M-tile boundaries, the middle.
std::vector<int64_t> probe_positions(int64_t batch) {
  std::vector<int64_t> positions;
  for (int64_t p : {int64_t{0}, int64_t{1}, kLinearMTile - 1, kLinearMTile, kLinearMTile + 1,
                    batch / 2, batch - 2, batch - 1}) {
    if (p >= 0 && p < batch &&
        std::find(positions.begin(), positions.end(), p) == positions.end()) {
      positions.push_back(p);
    }
  }
  return positions;
}

/// A row-wise op: in [num_rows, in_width] → out [num_rows, out_width] (bytes compared).
using RowOp = std::function<void(const float* in, int64_t num_rows, void* out)>;

/// Runs `op` on the probe row alone, then inside random batches, and memcmp's the probe's
/// output row. `out_row_bytes` is the size of one output row.
void expect_batch_invariant(const std::string& what, int64_t in_width, std::size_t out_row_bytes,
                            const RowOp& op, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  SCOPED_TRACE(what);
  SplitMix64 rng(seed);
  const std::vector<float> probe = random_floats(rng, in_width, lo, hi);
  std::vector<unsigned char> alone(out_row_bytes);
  op(probe.data(), 1, alone.data());
  for (int64_t batch : kBatchSizes) {
    for (int64_t position : probe_positions(batch)) {
      // Fresh neighbours for every (batch, position): different rows around the probe.
      std::vector<float> x = random_floats(rng, batch * in_width, lo, hi);
      std::memcpy(x.data() + position * in_width, probe.data(), in_width * sizeof(float));
      std::vector<unsigned char> out(batch * out_row_bytes);
      op(x.data(), batch, out.data());
      ASSERT_EQ(std::memcmp(out.data() + position * out_row_bytes, alone.data(), out_row_bytes), 0)
          << what << ": probe row differs in batch " << batch << " at position " << position;
    }
  }
}

/// Every position: for each batch size, one random batch through `op`, then every row of it
/// alone; each output row memcmp'd against its alone result.
void expect_every_row_invariant(const std::string& what, int64_t in_width,
                                std::size_t out_row_bytes, const RowOp& op, uint64_t seed,
                                float lo = -1.0f, float hi = 1.0f) {
  SCOPED_TRACE(what);
  SplitMix64 rng(seed);
  std::vector<unsigned char> alone(out_row_bytes);
  for (int64_t batch : kBatchSizes) {
    const std::vector<float> x = random_floats(rng, batch * in_width, lo, hi);
    std::vector<unsigned char> out(batch * out_row_bytes);
    op(x.data(), batch, out.data());
    for (int64_t row = 0; row < batch; ++row) {
      op(x.data() + row * in_width, 1, alone.data());
      ASSERT_EQ(std::memcmp(out.data() + row * out_row_bytes, alone.data(), out_row_bytes), 0)
          << what << ": row " << row << " of batch " << batch << " differs from the row alone";
    }
  }
}

LinearOptions onednn_tiles() {
  LinearOptions options;
  options.kernel = LinearKernel::kOneDnnTiles;
  return options;
}

LinearOptions forced_probe_failure() {
  LinearOptions options = onednn_tiles();
  options.force_probe_mismatch = true;
  return options;
}

struct LinearShape {
  int64_t out, in;
};

/// `a` and `b` give bitwise the same outputs for random batches of every size in kBatchSizes.
void expect_same_bits(const std::string& what, int64_t in, int64_t out, const Linear& a,
                      const Linear& b, uint64_t seed) {
  SCOPED_TRACE(what);
  SplitMix64 rng(seed);
  for (int64_t batch : kBatchSizes) {
    const std::vector<float> x = random_floats(rng, batch * in, -1.0f, 1.0f);
    std::vector<float> ya(batch * out), yb(batch * out);
    a.forward(x.data(), batch, ya.data());
    b.forward(x.data(), batch, yb.data());
    ASSERT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)), 0)
        << what << ": batch " << batch;
  }
}
const LinearShape kLinearShapes[] = {{64, 64}, {70, 100}, {1024, 1024}, {384, 4096}};

/// Every Linear GEMM for weights `w` (f32, or bf16 bits) of shape `s`: the default kernel,
/// the oneDNN tiles, and the tiles with the small-M probe forced to fail; each must be batch
/// invariant at every row, and the two tiles variants bitwise equal.
template <typename T>
void check_linear_paths(const char* type, const std::vector<T>& w, const LinearShape& s,
                        const std::vector<float>& bias, bool with_bias, SplitMix64& rng) {
  const Linear linear(w.data(), s.out, s.in, with_bias ? bias.data() : nullptr);
  const std::string what = std::string("Linear ") + type + " " + std::to_string(s.out) + "x" +
                           std::to_string(s.in) + (with_bias ? " bias" : "");
  report_linear_paths(linear_key(type, s.out, s.in, with_bias), linear);
  const RowOp op = [&](const float* x, int64_t n, void* y) {
    linear.forward(x, n, static_cast<float*>(y));
  };
  expect_batch_invariant(what, s.in, s.out * sizeof(float), op, rng.next());
  expect_every_row_invariant(what + " every row", s.in, s.out * sizeof(float), op, rng.next());
  // The oneDNN tiles (the fallback GEMM where the fixed-order kernel is unavailable).
  const Linear tiles(w.data(), s.out, s.in, with_bias ? bias.data() : nullptr,
                     onednn_tiles());
  const std::string tiles_type = std::string(type) + "_tiles";
  report_linear_paths(linear_key(tiles_type.c_str(), s.out, s.in, with_bias), tiles);
  const RowOp tiles_op = [&](const float* x, int64_t n, void* y) {
    tiles.forward(x, n, static_cast<float*>(y));
  };
  expect_batch_invariant(what + " tiles", s.in, s.out * sizeof(float), tiles_op, rng.next());
  expect_every_row_invariant(what + " tiles every row", s.in, s.out * sizeof(float),
                             tiles_op, rng.next());
  // Probe forced to fail: the fast path is off, padded tiles only, still invariant, and
  // bitwise equal to `tiles` (whose fast path, where its probe enabled it, claims to be
  // the same computation; where it is off this compares padded tiles with padded tiles).
  const Linear fallback(w.data(), s.out, s.in, with_bias ? bias.data() : nullptr,
                        forced_probe_failure());
  EXPECT_FALSE(fallback.small_m_path_enabled()) << what;
  const RowOp fallback_op = [&](const float* x, int64_t n, void* y) {
    fallback.forward(x, n, static_cast<float*>(y));
  };
  expect_every_row_invariant(what + " forced fallback", s.in, s.out * sizeof(float),
                             fallback_op, rng.next());
  expect_same_bits(what + " tiles vs fallback", s.in, s.out, tiles, fallback, rng.next());
}

TEST(BatchInvarianceTest, LinearF32) {
  const uint64_t seed = reference::test_seed("BatchInvarianceTest.LinearF32", 2001);
  SplitMix64 rng(seed);
  for (const LinearShape& s : kLinearShapes) {
    for (bool with_bias : {false, true}) {
      const std::vector<float> w = random_floats(rng, s.out * s.in, -0.1f, 0.1f);
      const std::vector<float> bias = random_floats(rng, s.out, -1.0f, 1.0f);
      check_linear_paths("f32", w, s, bias, with_bias, rng);
    }
  }
}

TEST(BatchInvarianceTest, LinearBF16) {
  const uint64_t seed = reference::test_seed("BatchInvarianceTest.LinearBF16", 2002);
  SplitMix64 rng(seed);
  for (const LinearShape& s : kLinearShapes) {
    for (bool with_bias : {false, true}) {
      const std::vector<uint16_t> w = random_bf16(rng, s.out * s.in, -0.1f, 0.1f);
      const std::vector<float> bias = random_floats(rng, s.out, -1.0f, 1.0f);
      check_linear_paths("bf16", w, s, bias, with_bias, rng);
    }
  }
}

TEST(BatchInvarianceTest, ExpertFfnF32AndBF16) {
  const uint64_t seed = reference::test_seed("BatchInvarianceTest.ExpertFfn", 2003);
  SplitMix64 rng(seed);
  struct Shape {
    int64_t hidden, ffn;
  };
  for (const Shape s : {Shape{96, 200}, Shape{256, 704}}) {
    const std::vector<float> gate = random_floats(rng, s.ffn * s.hidden, -0.1f, 0.1f);
    const std::vector<float> up = random_floats(rng, s.ffn * s.hidden, -0.1f, 0.1f);
    const std::vector<float> down = random_floats(rng, s.hidden * s.ffn, -0.1f, 0.1f);
    const ExpertFfn ffn_f32(gate.data(), up.data(), down.data(), s.hidden, s.ffn);
    expect_batch_invariant(
        "ExpertFfn f32 hidden " + std::to_string(s.hidden), s.hidden, s.hidden * sizeof(float),
        [&](const float* x, int64_t n, void* y) { ffn_f32.forward(x, n, static_cast<float*>(y)); },
        rng.next());
    expect_every_row_invariant(
        "ExpertFfn f32 every row, hidden " + std::to_string(s.hidden), s.hidden,
        s.hidden * sizeof(float),
        [&](const float* x, int64_t n, void* y) { ffn_f32.forward(x, n, static_cast<float*>(y)); },
        rng.next());
    const std::vector<uint16_t> gate16 = random_bf16(rng, s.ffn * s.hidden, -0.1f, 0.1f);
    const std::vector<uint16_t> up16 = random_bf16(rng, s.ffn * s.hidden, -0.1f, 0.1f);
    const std::vector<uint16_t> down16 = random_bf16(rng, s.hidden * s.ffn, -0.1f, 0.1f);
    const ExpertFfn ffn_bf16(gate16.data(), up16.data(), down16.data(), s.hidden, s.ffn);
    expect_batch_invariant(
        "ExpertFfn bf16 hidden " + std::to_string(s.hidden), s.hidden, s.hidden * sizeof(float),
        [&](const float* x, int64_t n, void* y) { ffn_bf16.forward(x, n, static_cast<float*>(y)); },
        rng.next());
    expect_every_row_invariant(
        "ExpertFfn bf16 every row, hidden " + std::to_string(s.hidden), s.hidden,
        s.hidden * sizeof(float),
        [&](const float* x, int64_t n, void* y) { ffn_bf16.forward(x, n, static_cast<float*>(y)); },
        rng.next());
  }
}

TEST(BatchInvarianceTest, RmsNorm) {
  const uint64_t seed = reference::test_seed("BatchInvarianceTest.RmsNorm", 2004);
  SplitMix64 rng(seed);
  for (int64_t dim : {1, 7, 1024, 4099}) {
    const std::vector<float> weight = random_floats(rng, dim, 0.5f, 1.5f);
    expect_batch_invariant(
        "rms_norm dim " + std::to_string(dim), dim, dim * sizeof(float),
        [&](const float* x, int64_t n, void* y) {
          rms_norm(x, weight.data(), n, dim, 1e-6f, static_cast<float*>(y));
        },
        rng.next(), -3.0f, 3.0f);
  }
}

TEST(BatchInvarianceTest, RouterTopk) {
  const uint64_t seed = reference::test_seed("BatchInvarianceTest.RouterTopk", 2005);
  SplitMix64 rng(seed);
  struct Config {
    int64_t num_experts, num_topk;
    bool renormalize;
  };
  for (const Config c :
       {Config{8, 2, true}, Config{60, 4, false}, Config{64, 8, true}, Config{5, 5, true}}) {
    const std::size_t ids_bytes = c.num_topk * sizeof(int32_t);
    const std::size_t row_bytes = ids_bytes + c.num_topk * sizeof(float);
    // Output row = ids then weights, packed, so one memcmp covers both.
    expect_batch_invariant(
        "router_topk E=" + std::to_string(c.num_experts) + " k=" + std::to_string(c.num_topk),
        c.num_experts, row_bytes,
        [&](const float* logits, int64_t n, void* out) {
          std::vector<int32_t> ids(n * c.num_topk);
          std::vector<float> weights(n * c.num_topk);
          router_topk(logits, n, c.num_experts, c.num_topk, c.renormalize, ids.data(),
                      weights.data());
          auto* bytes = static_cast<unsigned char*>(out);
          for (int64_t r = 0; r < n; ++r) {
            std::memcpy(bytes + r * row_bytes, ids.data() + r * c.num_topk, ids_bytes);
            std::memcpy(bytes + r * row_bytes + ids_bytes, weights.data() + r * c.num_topk,
                        c.num_topk * sizeof(float));
          }
        },
        rng.next(), -4.0f, 4.0f);
  }
}

}  // namespace
}  // namespace muflow::kernels::cpu
