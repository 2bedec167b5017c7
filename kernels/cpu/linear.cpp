#include "kernels/cpu/linear.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "kernels/assert.hpp"
#include "kernels/cpu/bf16.hpp"
#include "kernels/cpu/fixed_order_gemm.hpp"
#include "kernels/cpu/gemm_threads.hpp"
#include "kernels/cpu/weight_memory.hpp"

namespace muflow::kernels::cpu {
namespace {

using dnnl::memory;

/// The one oneDNN CPU engine of the process (created on first use; thread-safe static).
dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

/// Runs oneDNN single-threaded on the calling thread for the scope's lifetime. libgomp keeps
/// `nthreads-var` per thread, so this neither affects nor races with other threads; the
/// caller's previous value is restored on exit. A fixed thread count fixes the GEMM's
/// work split, hence its reduction order (reproducibility), and each muflow device is one
/// executor thread anyway.
class OmpSingleThreadScope {
 public:
  OmpSingleThreadScope() : previous_(omp_get_max_threads()) {
    if (previous_ != 1) omp_set_num_threads(1);
  }
  ~OmpSingleThreadScope() {
    if (previous_ != 1) omp_set_num_threads(previous_);
  }
  OmpSingleThreadScope(const OmpSingleThreadScope&) = delete;
  OmpSingleThreadScope& operator=(const OmpSingleThreadScope&) = delete;

 private:
  int previous_;
};

/// A growable, 64-byte aligned, per-thread byte buffer.
class AlignedBuffer {
 public:
  void* get(std::size_t num_bytes) {
    if (num_bytes + kAlign > storage_.size()) storage_.resize(num_bytes + kAlign);
    auto address = reinterpret_cast<std::uintptr_t>(storage_.data());
    return storage_.data() + ((kAlign - address % kAlign) % kAlign);
  }

 private:
  static constexpr std::size_t kAlign = 64;
  std::vector<unsigned char> storage_;
};

/// Per-thread scratch of Linear::forward (every Linear on a thread shares it; forward is not
/// re-entrant on one thread, so that is safe).
struct ThreadScratch {
  AlignedBuffer scratchpad;  // oneDNN's user scratchpad
  AlignedBuffer src_tile;    // padded f32 tile or bf16-rounded tile
  AlignedBuffer dst_tile;    // padded output tile
};

ThreadScratch& thread_scratch() {
  thread_local ThreadScratch scratch;
  return scratch;
}

[[noreturn]] void dnnl_failure(const char* what, const dnnl::error& error) {
  std::string message = std::string(what) + ": " + error.what();
  MUFLOW_ASSERT(false, message.c_str());
  std::abort();
}

/// One oneDNN matmul primitive `[rows, in] x [in, out]` and what executing it needs.
struct Primitive {
  int64_t rows = 0;
  dnnl::matmul matmul;
  memory::desc src_md, dst_md, scratchpad_md;
};

/// Per-process verdicts of the small-M probe, keyed by the configuration that decides
/// oneDNN's kernel choice: (compute type, bf16 rounding, in, out, bias).
using ProbeKey = std::tuple<int, bool, int64_t, int64_t, bool>;

std::mutex& probe_cache_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::map<ProbeKey, bool>& probe_cache() {
  static std::map<ProbeKey, bool> cache;
  return cache;
}

/// splitmix64 (Steele, Lea, Flood 2014), for the fixed-seed probe rows.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// kLinearMTile probe rows of `in` values: uniform mantissas in [1, 2), random signs,
/// per-element exponents in [-12, 12], and a per-row scale 2^(3·(r mod 5) − 6), so partial
/// sums span many binades and any change of summation order shows in the rounding.
std::vector<float> probe_rows(int64_t in) {
  uint64_t state = 0x6d75666c6f77ull;  // "muflow", fixed
  std::vector<float> rows(static_cast<std::size_t>(kLinearMTile * in));
  for (int64_t r = 0; r < kLinearMTile; ++r) {
    const int row_exponent = 3 * static_cast<int>(r % 5) - 6;
    for (int64_t i = 0; i < in; ++i) {
      const uint64_t bits = splitmix64(state);
      const float mantissa = 1.0f + static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
      const int exponent = static_cast<int>((bits >> 8) % 25) - 12 + row_exponent;
      const float value = std::ldexp(mantissa, exponent);
      rows[static_cast<std::size_t>(r * in + i)] = (bits & 1) != 0 ? -value : value;
    }
  }
  return rows;
}

/// Whether `options` asks for the fixed-order kernel (it may still be unavailable).
bool wants_fixed_order(const LinearOptions& options) {
  return options.kernel != LinearKernel::kOneDnnTiles;
}

}  // namespace

struct Linear::Impl {
  int64_t in_features = 0;
  int64_t out_features = 0;
  LinearWeightType weight_type = LinearWeightType::kF32;  // type the primitive computes in
  bool round_src_to_bf16 = false;  // bf16 weights given: activations are rounded to bf16
  bool has_bias = false;
  memory::data_type src_type = memory::data_type::f32;
  Primitive tile;   // [kLinearMTile, in]: every full tile, and padded remainders
  Primitive small;  // [kLinearSmallM, in]: remainders ≤ small_max_rows when enabled
  bool small_enabled = false;
  int64_t small_max_rows = 0;  // kLinearSmallMMaxRows{F32,BF16} by src_type
  memory packed_weights;  // shared by both primitives (identical layout, checked)
  memory bias;

  // The fixed-order kernel (kernel == kFixedOrder): which variant, its packed panels, the bias.
  enum class Fixed { kF32, kBf16, kBf16Weights };  // f32; bf16 dot products; bf16 W, f32 math
  LinearKernel kernel = LinearKernel::kOneDnnTiles;
  Fixed fixed = Fixed::kF32;
  WeightMemory fixed_packed;
  std::size_t fixed_bytes = 0;
  std::vector<float> fixed_bias;

  /// Packs `weight` ([out, in]: f32 for kF32, bf16 bits otherwise) for the fixed-order kernel.
  void build_fixed(const void* weight, Fixed variant, const float* bias_values) {
    kernel = LinearKernel::kFixedOrder;
    fixed = variant;
    const int64_t n = out_features, k = in_features;
    std::size_t bytes = 0;
    switch (variant) {
      case Fixed::kF32: bytes = fixed_order_packed_elems_f32(n, k) * sizeof(float); break;
      case Fixed::kBf16: bytes = fixed_order_packed_elems_bf16(n, k) * sizeof(uint16_t); break;
      case Fixed::kBf16Weights:
        bytes = fixed_order_packed_elems_f32(n, k) * sizeof(uint16_t);
        break;
    }
    fixed_bytes = (bytes + 63) / 64 * 64;
    fixed_packed = allocate_weights(fixed_bytes);
    MUFLOW_ASSERT(fixed_packed != nullptr, "Linear: out of memory packing weights");
    auto* bits = static_cast<const uint16_t*>(weight);
    auto* packed16 = static_cast<uint16_t*>(fixed_packed.get());
    switch (variant) {
      case Fixed::kF32:
        fixed_order_pack_f32(static_cast<const float*>(weight), n, k,
                             static_cast<float*>(fixed_packed.get()));
        break;
      case Fixed::kBf16: fixed_order_pack_bf16(bits, n, k, packed16); break;
      case Fixed::kBf16Weights: fixed_order_pack_bf16_weights(bits, n, k, packed16); break;
    }
    if (has_bias) fixed_bias.assign(bias_values, bias_values + out_features);
  }

  /// forward_packed on the fixed-order kernel, `weights` = its packed panels.
  void forward_fixed(const void* weights, const float* x, int64_t rows, float* y) const {
    const int threads = gemm_threads();
    const float* bias_values = has_bias ? fixed_bias.data() : nullptr;
    const int64_t in = in_features;
    ThreadScratch& scratch = thread_scratch();
    if (fixed == Fixed::kBf16) {
      const int64_t padded_k = fixed_order_padded_k_bf16(in);
      auto* x16 = static_cast<uint16_t*>(
          scratch.src_tile.get(static_cast<std::size_t>(rows * padded_k) * sizeof(uint16_t)));
      for (int64_t r = 0; r < rows; ++r) {
        f32_to_bf16_n(x + r * in, in, x16 + r * padded_k);
        if (padded_k != in) x16[r * padded_k + in] = 0;
      }
      fixed_order_gemm_bf16(static_cast<const uint16_t*>(weights), out_features, in, x16, rows,
                            bias_values, y, threads);
      return;
    }
    const float* src = x;
    if (round_src_to_bf16) {  // bf16 weights computed in f32: activations through bf16
      auto* rounded = static_cast<float*>(
          scratch.src_tile.get(static_cast<std::size_t>(rows * in) * sizeof(float)));
      for (int64_t i = 0; i < rows * in; ++i) rounded[i] = bf16_to_f32(f32_to_bf16(x[i]));
      src = rounded;
    }
    if (fixed == Fixed::kBf16Weights) {
      fixed_order_gemm_bf16_weights(static_cast<const uint16_t*>(weights), out_features, in, src,
                                    rows, bias_values, y, threads);
      return;
    }
    fixed_order_gemm_f32(static_cast<const float*>(weights), out_features, in, src, rows,
                         bias_values, y, threads);
  }

  std::size_t src_elem_size() const {
    return src_type == memory::data_type::bf16 ? sizeof(uint16_t) : sizeof(float);
  }

  /// The source of a primitive of `prim_rows` rows for `rows` rows of x: x itself when no
  /// conversion or padding is needed, else `buffer` filled with the (bf16-rounded) rows and
  /// zero padding up to prim_rows. The same conversion for both primitives and the probe.
  const void* prepare_src(const float* x, int64_t rows, int64_t prim_rows, void* buffer) const {
    const int64_t in = in_features;
    if (round_src_to_bf16) {
      if (src_type == memory::data_type::bf16) {
        auto* tile = static_cast<uint16_t*>(buffer);
        f32_to_bf16_n(x, rows * in, tile);
        std::fill(tile + rows * in, tile + prim_rows * in, uint16_t{0});
      } else {  // bf16 weights upcast to f32: round activations through bf16 too
        auto* tile = static_cast<float*>(buffer);
        for (int64_t i = 0; i < rows * in; ++i) tile[i] = bf16_to_f32(f32_to_bf16(x[i]));
        std::fill(tile + rows * in, tile + prim_rows * in, 0.0f);
      }
      return buffer;
    }
    if (rows == prim_rows) return x;
    auto* tile = static_cast<float*>(buffer);
    std::memcpy(tile, x, static_cast<std::size_t>(rows * in) * sizeof(float));
    std::fill(tile + rows * in, tile + prim_rows * in, 0.0f);
    return buffer;
  }

  /// Runs `prim` once: y[rows, out] = x[rows, in]·W (+ bias), rows ≤ prim.rows, padding and
  /// converting through the thread's scratch as needed. Caller holds OmpSingleThreadScope.
  void execute(const Primitive& prim, const float* x, int64_t rows, float* y) const {
    execute_with(prim, packed_weights, x, rows, y);
  }

  /// `execute` with the prepacked weights read from `weights` (the same desc as
  /// packed_weights: this Linear's own, or a byte copy of them elsewhere).
  void execute_with(const Primitive& prim, const memory& weights, const float* x, int64_t rows,
                    float* y) const {
    ThreadScratch& scratch = thread_scratch();
    thread_local dnnl::stream stream(cpu_engine());
    dnnl::engine& engine = cpu_engine();
    void* src_buffer =
        scratch.src_tile.get(static_cast<std::size_t>(prim.rows * in_features) * src_elem_size());
    const void* src_ptr = prepare_src(x, rows, prim.rows, src_buffer);
    float* dst_ptr = y;
    if (rows != prim.rows) {
      dst_ptr = static_cast<float*>(scratch.dst_tile.get(
          static_cast<std::size_t>(prim.rows * out_features) * sizeof(float)));
    }
    memory src(prim.src_md, engine, const_cast<void*>(src_ptr));
    memory dst(prim.dst_md, engine, dst_ptr);
    memory scratchpad(prim.scratchpad_md, engine,
                      scratch.scratchpad.get(prim.scratchpad_md.get_size()));
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src},
                                         {DNNL_ARG_WEIGHTS, weights},
                                         {DNNL_ARG_DST, dst},
                                         {DNNL_ARG_SCRATCHPAD, scratchpad}};
    if (has_bias) args.emplace(DNNL_ARG_BIAS, bias);
    prim.matmul.execute(stream, args);
    stream.wait();
    if (rows != prim.rows) {
      std::memcpy(y, dst_ptr, static_cast<std::size_t>(rows * out_features) * sizeof(float));
    }
  }

  /// Creates the primitive descriptor of `rows` rows for weights of type `weight_dt` (weights
  /// layout `any`). Throws dnnl::error when oneDNN has no implementation.
  dnnl::matmul::primitive_desc make_pd(int64_t rows, memory::data_type weight_dt) const {
    const memory::desc src_md({rows, in_features}, src_type, memory::format_tag::ab);
    const memory::desc dst_md({rows, out_features}, memory::data_type::f32,
                              memory::format_tag::ab);
    const memory::desc any_weights({in_features, out_features}, weight_dt,
                                   memory::format_tag::any);
    const memory::desc bias_md({1, out_features}, memory::data_type::f32,
                               memory::format_tag::ab);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::desc desc = has_bias
                                        ? dnnl::matmul::desc(src_md, any_weights, bias_md, dst_md)
                                        : dnnl::matmul::desc(src_md, any_weights, dst_md);
    return dnnl::matmul::primitive_desc(desc, attr, cpu_engine());
  }

  static Primitive make_primitive(const dnnl::matmul::primitive_desc& pd, int64_t rows) {
    Primitive prim;
    prim.rows = rows;
    prim.src_md = pd.src_desc();
    prim.dst_md = pd.dst_desc();
    prim.scratchpad_md = pd.scratchpad_desc();
    prim.matmul = dnnl::matmul(pd);
    return prim;
  }

  /// Creates the fixed-shape tile primitive for `weight_dt` weights and prepacks `weight`
  /// (`[out, in]` row-major, element type `weight_dt`). Throws dnnl::error if oneDNN has no
  /// implementation for this type on this CPU.
  void build(const void* weight, memory::data_type weight_dt, const float* bias_values) {
    dnnl::engine& engine = cpu_engine();
    src_type = weight_dt;  // f32·f32 or bf16·bf16, always f32 output
    const dnnl::matmul::primitive_desc pd = make_pd(kLinearMTile, weight_dt);
    tile = make_primitive(pd, kLinearMTile);

    // HF stores W as [out, in] row-major; the matmul wants [in, out]: a transposed view.
    const memory::desc user_weights_md({in_features, out_features}, weight_dt,
                                       memory::dims{1, in_features});
    memory user_weights(user_weights_md, engine, const_cast<void*>(weight));
    packed_weights = memory(pd.weights_desc(), engine);
    dnnl::stream stream(engine);
    dnnl::reorder(user_weights, packed_weights).execute(stream, user_weights, packed_weights);
    stream.wait();

    if (has_bias) {
      bias = memory(memory::desc({1, out_features}, memory::data_type::f32,
                                 memory::format_tag::ab),
                    engine);
      std::memcpy(bias.get_data_handle(), bias_values,
                  static_cast<std::size_t>(out_features) * sizeof(float));
    }
  }

  /// Creates the small primitive and enables it when the probe passes (see linear.hpp).
  /// Never throws: any oneDNN failure just leaves the fast path off. Caller holds
  /// OmpSingleThreadScope and has called build().
  void setup_small_path(const LinearOptions& options) {
    small_enabled = false;
    small_max_rows = src_type == memory::data_type::bf16 ? kLinearSmallMMaxRowsBF16
                                                         : kLinearSmallMMaxRowsF32;
    if (!options.allow_small_m_path) return;
    try {
      const dnnl::matmul::primitive_desc pd = make_pd(kLinearSmallM, src_type);
      // Same prepacked weights only: a second copy would double the weights' memory.
      if (pd.weights_desc() != packed_weights.get_desc()) return;
      small = make_primitive(pd, kLinearSmallM);
    } catch (const dnnl::error&) {
      return;
    }
    const ProbeKey key{static_cast<int>(src_type), round_src_to_bf16, in_features, out_features,
                       has_bias};
    if (!options.force_probe_mismatch) {
      std::lock_guard<std::mutex> lock(probe_cache_mutex());
      const auto it = probe_cache().find(key);
      if (it != probe_cache().end()) {
        small_enabled = it->second;
        return;
      }
    }
    bool equal = false;
    try {
      equal = probe_small_equals_tile(options.force_probe_mismatch);
    } catch (const dnnl::error&) {
      equal = false;
    }
    small_enabled = equal;
    if (!options.force_probe_mismatch) {
      std::lock_guard<std::mutex> lock(probe_cache_mutex());
      probe_cache().emplace(key, equal);
    }
  }

  /// The probe: kLinearMTile rows through the tile primitive at two placements (identity and
  /// rotated by 7, so each row sits at two positions and each position 0..15 is checked
  /// with two different rows) and one at a time through the small primitive; true iff every
  /// row is bitwise equal. `corrupt` flips one bit of one small output (test hook).
  bool probe_small_equals_tile(bool corrupt) const {
    const int64_t in = in_features;
    const int64_t out = out_features;
    const std::vector<float> rows = probe_rows(in);
    std::vector<float> alone(static_cast<std::size_t>(kLinearMTile * out));
    for (int64_t r = 0; r < kLinearMTile; r += kLinearSmallM) {
      execute(small, rows.data() + r * in, kLinearSmallM, alone.data() + r * out);
    }
    if (corrupt) {
      uint32_t bits = 0;
      std::memcpy(&bits, &alone[0], sizeof(bits));
      bits ^= 1u;
      std::memcpy(&alone[0], &bits, sizeof(bits));
    }
    constexpr int64_t kRotations[] = {0, 7};
    std::vector<float> placed(rows.size());
    std::vector<float> tiled(alone.size());
    for (const int64_t rotation : kRotations) {
      // Row r at position (r + rotation) mod kLinearMTile.
      for (int64_t r = 0; r < kLinearMTile; ++r) {
        const int64_t position = (r + rotation) % kLinearMTile;
        std::memcpy(placed.data() + position * in, rows.data() + r * in,
                    static_cast<std::size_t>(in) * sizeof(float));
      }
      execute(tile, placed.data(), kLinearMTile, tiled.data());
      for (int64_t r = 0; r < kLinearMTile; ++r) {
        const int64_t position = (r + rotation) % kLinearMTile;
        if (std::memcmp(tiled.data() + position * out, alone.data() + r * out,
                        static_cast<std::size_t>(out) * sizeof(float)) != 0) {
          return false;
        }
      }
    }
    return true;
  }
};

Linear::Linear(const float* weight, int64_t out_features, int64_t in_features,
               const float* bias, const LinearOptions& options)
    : impl_(std::make_unique<Impl>()) {
  MUFLOW_ASSERT(weight != nullptr, "Linear: null weight");
  MUFLOW_ASSERT(out_features > 0 && in_features > 0, "Linear: dims must be positive");
  OmpSingleThreadScope single_thread;
  impl_->in_features = in_features;
  impl_->out_features = out_features;
  impl_->has_bias = bias != nullptr;
  impl_->weight_type = LinearWeightType::kF32;
  if (wants_fixed_order(options) && fixed_order_gemm_f32_available()) {
    impl_->build_fixed(weight, Impl::Fixed::kF32, bias);
    return;
  }
  try {
    impl_->build(weight, memory::data_type::f32, bias);
  } catch (const dnnl::error& error) {
    dnnl_failure("Linear(f32): oneDNN matmul creation failed", error);
  }
  impl_->setup_small_path(options);
}

Linear::Linear(const uint16_t* weight_bf16, int64_t out_features, int64_t in_features,
               const float* bias, const LinearOptions& options)
    : impl_(std::make_unique<Impl>()) {
  MUFLOW_ASSERT(weight_bf16 != nullptr, "Linear: null weight");
  MUFLOW_ASSERT(out_features > 0 && in_features > 0, "Linear: dims must be positive");
  OmpSingleThreadScope single_thread;
  impl_->in_features = in_features;
  impl_->out_features = out_features;
  impl_->has_bias = bias != nullptr;
  impl_->round_src_to_bf16 = true;
  const Bf16Compute compute = resolve_bf16_compute(options.bf16_compute);
  if (wants_fixed_order(options)) {
    // The bf16 kernel needs AVX512-BF16 on the CPU and in oneDNN's effective ISA (so
    // ONEDNN_MAX_CPU_ISA emulates a CPU without it for both GEMMs alike).
    if (compute == Bf16Compute::kBF16 && fixed_order_gemm_bf16_available() &&
        cpu_has_native_bf16()) {
      impl_->weight_type = LinearWeightType::kBF16;
      impl_->build_fixed(weight_bf16, Impl::Fixed::kBf16, bias);
      return;
    }
    if (compute == Bf16Compute::kF32 && fixed_order_gemm_f32_available()) {
      // f32 math on the weights' exact f32 values, widened in registers: the weights stay
      // bf16 in memory (half the bytes to stream per token).
      impl_->weight_type = LinearWeightType::kF32;
      impl_->build_fixed(weight_bf16, Impl::Fixed::kBf16Weights, bias);
      return;
    }
  }
  bool built = false;
  if (compute == Bf16Compute::kBF16) {
    try {
      impl_->weight_type = LinearWeightType::kBF16;
      impl_->build(weight_bf16, memory::data_type::bf16, bias);
      built = true;
    } catch (const dnnl::error&) {
      // No bf16 matmul on this CPU / oneDNN build: f32 below.
    }
  }
  if (!built) {
    // f32 compute (chosen for a CPU without native bf16, forced, or no bf16 matmul): upcast
    // the weights to f32 (exact) and keep rounding activations to bf16, so the products are
    // the same as in the bf16 path (bf16·bf16 is exact in f32); only the f32 accumulation
    // order may differ.
    const std::size_t num_weights = static_cast<std::size_t>(out_features) * in_features;
    std::vector<float> upcast(num_weights);
    for (std::size_t i = 0; i < num_weights; ++i) upcast[i] = bf16_to_f32(weight_bf16[i]);
    impl_->weight_type = LinearWeightType::kF32;
    try {
      impl_->build(upcast.data(), memory::data_type::f32, bias);
    } catch (const dnnl::error& error) {
      dnnl_failure("Linear(bf16 fallback to f32): oneDNN matmul creation failed", error);
    }
  }
  impl_->setup_small_path(options);
}

Linear::~Linear() = default;
Linear::Linear(Linear&&) noexcept = default;
Linear& Linear::operator=(Linear&&) noexcept = default;

int64_t Linear::in_features() const { return impl_->in_features; }
int64_t Linear::out_features() const { return impl_->out_features; }
LinearWeightType Linear::weight_type() const { return impl_->weight_type; }
bool Linear::small_m_path_enabled() const { return impl_->small_enabled; }
LinearKernel Linear::kernel() const { return impl_->kernel; }

std::size_t Linear::packed_bytes() const {
  if (impl_->kernel == LinearKernel::kFixedOrder) return impl_->fixed_bytes;
  return impl_->packed_weights.get_desc().get_size();
}

const void* Linear::packed_data() const {
  if (impl_->kernel == LinearKernel::kFixedOrder) return impl_->fixed_packed.get();
  return impl_->packed_weights.get_data_handle();
}

void Linear::forward(const float* x, int64_t num_rows, float* y) const {
  forward_packed(nullptr, x, num_rows, y);
}

void Linear::forward_packed(const void* packed, const float* x, int64_t num_rows,
                            float* y) const {
  MUFLOW_ASSERT(num_rows >= 0, "Linear::forward: negative num_rows");
  if (num_rows == 0) return;
  MUFLOW_ASSERT(x != nullptr && y != nullptr, "Linear::forward: null x or y");
  MUFLOW_ASSERT(packed == nullptr || reinterpret_cast<std::uintptr_t>(packed) % 64 == 0,
                "Linear::forward_packed: weights must be 64-byte aligned");
  const Impl& impl = *impl_;
  if (impl.kernel == LinearKernel::kFixedOrder) {
    impl.forward_fixed(packed != nullptr ? packed : impl.fixed_packed.get(), x, num_rows, y);
    return;
  }
  memory weights = impl.packed_weights;
  const int64_t in = impl.in_features;
  const int64_t out = impl.out_features;
  const int64_t full_rows = num_rows - num_rows % kLinearMTile;
  const int64_t remainder = num_rows - full_rows;

  OmpSingleThreadScope single_thread;
  try {
    if (packed != nullptr) {
      weights = memory(impl.packed_weights.get_desc(), cpu_engine(), const_cast<void*>(packed));
    }
    for (int64_t row = 0; row < full_rows; row += kLinearMTile) {
      impl.execute_with(impl.tile, weights, x + row * in, kLinearMTile, y + row * out);
    }
    if (remainder == 0) return;
    if (impl.small_enabled && remainder <= impl.small_max_rows) {
      // Checked fast path: bitwise the same rows as the tile primitive (construction probe).
      for (int64_t row = full_rows; row < num_rows; row += kLinearSmallM) {
        const int64_t rows = std::min<int64_t>(kLinearSmallM, num_rows - row);
        impl.execute_with(impl.small, weights, x + row * in, rows, y + row * out);
      }
    } else {
      impl.execute_with(impl.tile, weights, x + full_rows * in, remainder, y + full_rows * out);
    }
  } catch (const dnnl::error& error) {
    dnnl_failure("Linear::forward: oneDNN matmul execution failed", error);
  }
}

}  // namespace muflow::kernels::cpu
