#include "kernels/cpu/expert_ffn.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/assert.hpp"
#include "kernels/cpu/avx2_lanes.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/fast_exp.hpp"
#include "kernels/cpu/gemm_threads.hpp"

namespace muflow::kernels::cpu {
namespace {

/// Rows per chunk with the fixed-order kernel: 96 rows of a 4096-wide expert keep a 3 MiB
/// intermediate (in L3), and the expert's weights are read once per 96 rows.
constexpr int64_t kExpertRowChunk = 96;

/// Stacks gate `[ffn, hidden]` over up `[ffn, hidden]` into one `[2·ffn, hidden]` matrix.
template <typename T>
std::vector<T> stack_gate_up(const T* gate, const T* up, int64_t hidden, int64_t ffn) {
  MUFLOW_ASSERT(gate != nullptr && up != nullptr, "ExpertFfn: null gate or up weight");
  MUFLOW_ASSERT(hidden > 0 && ffn > 0, "ExpertFfn: dims must be positive");
  const std::size_t num_values = static_cast<std::size_t>(ffn * hidden);
  std::vector<T> stacked(2 * num_values);
  std::memcpy(stacked.data(), gate, num_values * sizeof(T));
  std::memcpy(stacked.data() + num_values, up, num_values * sizeof(T));
  return stacked;
}

}  // namespace

namespace {
LinearOptions with(Bf16Compute compute, LinearKernel kernel) {
  LinearOptions o;
  o.bf16_compute = compute;
  o.kernel = kernel;
  return o;
}
}  // namespace

ExpertFfn::ExpertFfn(const float* gate, const float* up, const float* down, int64_t hidden,
                     int64_t ffn, LinearKernel kernel)
    : hidden_(hidden),
      ffn_(ffn),
      gate_up_(stack_gate_up(gate, up, hidden, ffn).data(), 2 * ffn, hidden, nullptr,
               with(Bf16Compute::kAuto, kernel)),
      down_(down, hidden, ffn, nullptr, with(Bf16Compute::kAuto, kernel)) {}

ExpertFfn::ExpertFfn(const uint16_t* gate, const uint16_t* up, const uint16_t* down,
                     int64_t hidden, int64_t ffn, Bf16Compute compute, LinearKernel kernel)
    : hidden_(hidden),
      ffn_(ffn),
      gate_up_(stack_gate_up(gate, up, hidden, ffn).data(), 2 * ffn, hidden, nullptr,
               with(compute, kernel)),
      down_(down, hidden, ffn, nullptr, with(compute, kernel)) {}

namespace {
std::size_t round_up_64(std::size_t n) { return (n + 63) / 64 * 64; }
}  // namespace

std::size_t ExpertFfn::packed_bytes() const {
  return round_up_64(gate_up_.packed_bytes()) + down_.packed_bytes();
}

void ExpertFfn::copy_packed(void* dst) const {
  MUFLOW_ASSERT(reinterpret_cast<std::uintptr_t>(dst) % 64 == 0,
                "ExpertFfn::copy_packed: destination must be 64-byte aligned");
  auto* out = static_cast<unsigned char*>(dst);
  std::memcpy(out, gate_up_.packed_data(), gate_up_.packed_bytes());
  std::memcpy(out + round_up_64(gate_up_.packed_bytes()), down_.packed_data(),
              down_.packed_bytes());
}

void ExpertFfn::forward(const float* x, int64_t num_rows, float* y) const {
  forward_packed(nullptr, x, num_rows, y);
}

void ExpertFfn::forward_packed(const void* packed, const float* x, int64_t num_rows,
                               float* y) const {
  MUFLOW_ASSERT(num_rows >= 0, "ExpertFfn::forward: negative num_rows");
  const auto* base = static_cast<const unsigned char*>(packed);
  const void* gate_up_w = base;
  const void* down_w = base ? base + round_up_64(gate_up_.packed_bytes()) : nullptr;
  // Rows go through in chunks, which bounds the [rows, 2·ffn] intermediate: one tile for the
  // oneDNN tiles (its weights are re-read per tile anyway), kExpertRowChunk rows for the
  // fixed-order kernel (each chunk reads the weights once). Each Linear is batch invariant and
  // swiglu is element-wise, so chunking does not change any row's bits.
  const int64_t chunk =
      gate_up_.kernel() == LinearKernel::kFixedOrder ? kExpertRowChunk : kLinearMTile;
  thread_local std::vector<float> gate_up_buffer;
  thread_local std::vector<float> activation_buffer;
  const int64_t buffer_rows = std::min(chunk, num_rows);
  if (gate_up_buffer.size() < static_cast<std::size_t>(buffer_rows * 2 * ffn_)) {
    gate_up_buffer.resize(static_cast<std::size_t>(buffer_rows * 2 * ffn_));
    activation_buffer.resize(static_cast<std::size_t>(buffer_rows * ffn_));
  }
  for (int64_t row = 0; row < num_rows; row += chunk) {
    const int64_t rows = std::min<int64_t>(chunk, num_rows - row);
    gate_up_.forward_packed(gate_up_w, x + row * hidden_, rows, gate_up_buffer.data());
    swiglu(gate_up_buffer.data(), rows, ffn_, activation_buffer.data());
    down_.forward_packed(down_w, activation_buffer.data(), rows, y + row * hidden_);
  }
}

namespace {

/// Elements of a swiglu call below which it stays on the calling thread.
constexpr int64_t kSwigluElementsPerThread = int64_t{1} << 16;

MUFLOW_TARGET_AVX512 void swiglu_row_avx512(const float* gate, const float* up, int64_t ffn,
                                            float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t j = 0; j < ffn; j += 16) {
    const auto mask = static_cast<__mmask16>(ffn - j >= 16 ? 0xFFFF : (1u << (ffn - j)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(mask, gate + j);
    const __m512 e = fast_exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(out + j, mask, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(mask, up + j)));
  }
}

MUFLOW_TARGET_AVX2 void swiglu_row_avx2(const float* gate, const float* up, int64_t ffn,
                                        float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int64_t j = 0; j < ffn; j += 8) {
    const int64_t count = std::min<int64_t>(8, ffn - j);
    const __m256i mask = avx2_lanes_below(count);
    const __m256 g = _mm256_maskload_ps(gate + j, mask);
    const __m256 e = fast_exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_maskstore_ps(out + j, mask, _mm256_mul_ps(silu, _mm256_maskload_ps(up + j, mask)));
  }
}

// One element at a time; compiled twice below.
[[gnu::always_inline]] inline void swiglu_row_scalar(const float* gate, const float* up,
                                                     int64_t ffn, float* out) {
  for (int64_t j = 0; j < ffn; ++j) out[j] = (gate[j] / (1.0f + fast_exp(-gate[j]))) * up[j];
}

// fast_exp's std::fma and std::nearbyint as instructions (vfmadd, roundss).
MUFLOW_TARGET_AVX2 void swiglu_row_scalar_fma(const float* gate, const float* up, int64_t ffn,
                                              float* out) {
  swiglu_row_scalar(gate, up, ffn, out);
}

// The same as library calls (baseline x86-64 has neither instruction).
void swiglu_row_scalar_baseline(const float* gate, const float* up, int64_t ffn, float* out) {
  swiglu_row_scalar(gate, up, ffn, out);
}

// The scalar form with hardware FMA and rounding where the CPU has them; the same bits either
// way. Chosen by a CPUID test, not an ifunc (`target_clones`): an ifunc resolver runs inside
// the dynamic loader's relocation pass, and there, before main, the ASan build's api_test
// (libmuflow.so beside the static kernels) crashed once it was linked with lld.
void swiglu_row(const float* gate, const float* up, int64_t ffn, float* out) {
  if (cpu_has_avx2_fma()) {
    swiglu_row_scalar_fma(gate, up, ffn, out);
  } else {
    swiglu_row_scalar_baseline(gate, up, ffn, out);
  }
}

}  // namespace

void swiglu_generic(const float* gate_up, int64_t num_rows, int64_t ffn, float* out) {
  MUFLOW_ASSERT(num_rows >= 0 && ffn > 0, "swiglu: bad sizes");
  for (int64_t r = 0; r < num_rows; ++r) {
    swiglu_row(gate_up + r * 2 * ffn, gate_up + r * 2 * ffn + ffn, ffn, out + r * ffn);
  }
}

void swiglu(const float* gate_up, int64_t num_rows, int64_t ffn, float* out,
            std::optional<VectorIsa> isa) {
  MUFLOW_ASSERT(num_rows >= 0 && ffn > 0, "swiglu: bad sizes");
  if (!isa) isa = widest_vector_isa();
  MUFLOW_ASSERT(!isa || cpu_has_isa(*isa), "swiglu: the CPU lacks the ISA asked for");
  const int threads = static_cast<int>(std::min<int64_t>(
      {gemm_threads(), num_rows, std::max<int64_t>(1, num_rows * ffn / kSwigluElementsPerThread)}));
  // Element-wise: how rows are split over threads changes no bit.
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t r = 0; r < num_rows; ++r) {
    const float* gate = gate_up + r * 2 * ffn;
    if (isa == VectorIsa::kAvx512) {
      swiglu_row_avx512(gate, gate + ffn, ffn, out + r * ffn);
    } else if (isa == VectorIsa::kAvx2) {
      swiglu_row_avx2(gate, gate + ffn, ffn, out + r * ffn);
    } else {
      swiglu_row(gate, gate + ffn, ffn, out + r * ffn);
    }
  }
}

}  // namespace muflow::kernels::cpu
