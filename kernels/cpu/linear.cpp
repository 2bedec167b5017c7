#include "kernels/cpu/linear.hpp"

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/assert.hpp"
#include "kernels/cpu/bf16.hpp"

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

}  // namespace

struct Linear::Impl {
  int64_t in_features = 0;
  int64_t out_features = 0;
  LinearWeightType weight_type = LinearWeightType::kF32;  // type the primitive computes in
  bool round_src_to_bf16 = false;  // bf16 weights given: activations are rounded to bf16
  bool has_bias = false;
  memory::data_type src_type = memory::data_type::f32;
  memory::desc src_md, dst_md, scratchpad_md;
  dnnl::matmul matmul;
  memory packed_weights;
  memory bias;

  /// Creates the fixed-shape primitive for `weight_dt` weights and prepacks `weight`
  /// (`[out, in]` row-major, element type `weight_dt`). Throws dnnl::error if oneDNN has no
  /// implementation for this type on this CPU.
  void build(const void* weight, memory::data_type weight_dt, const float* bias_values) {
    dnnl::engine& engine = cpu_engine();
    src_type = weight_dt;  // f32·f32 or bf16·bf16, always f32 output
    src_md = memory::desc({kLinearMTile, in_features}, src_type, memory::format_tag::ab);
    dst_md = memory::desc({kLinearMTile, out_features}, memory::data_type::f32,
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
    const dnnl::matmul::primitive_desc pd(desc, attr, engine);
    scratchpad_md = pd.scratchpad_desc();
    matmul = dnnl::matmul(pd);

    // HF stores W as [out, in] row-major; the matmul wants [in, out]: a transposed view.
    const memory::desc user_weights_md({in_features, out_features}, weight_dt,
                                       memory::dims{1, in_features});
    memory user_weights(user_weights_md, engine, const_cast<void*>(weight));
    packed_weights = memory(pd.weights_desc(), engine);
    dnnl::stream stream(engine);
    dnnl::reorder(user_weights, packed_weights).execute(stream, user_weights, packed_weights);
    stream.wait();

    if (has_bias) {
      bias = memory(bias_md, engine);
      std::memcpy(bias.get_data_handle(), bias_values,
                  static_cast<std::size_t>(out_features) * sizeof(float));
    }
  }
};

Linear::Linear(const float* weight, int64_t out_features, int64_t in_features,
               const float* bias)
    : impl_(std::make_unique<Impl>()) {
  MUFLOW_ASSERT(weight != nullptr, "Linear: null weight");
  MUFLOW_ASSERT(out_features > 0 && in_features > 0, "Linear: dims must be positive");
  OmpSingleThreadScope single_thread;
  impl_->in_features = in_features;
  impl_->out_features = out_features;
  impl_->has_bias = bias != nullptr;
  impl_->weight_type = LinearWeightType::kF32;
  try {
    impl_->build(weight, memory::data_type::f32, bias);
  } catch (const dnnl::error& error) {
    dnnl_failure("Linear(f32): oneDNN matmul creation failed", error);
  }
}

Linear::Linear(const uint16_t* weight_bf16, int64_t out_features, int64_t in_features,
               const float* bias)
    : impl_(std::make_unique<Impl>()) {
  MUFLOW_ASSERT(weight_bf16 != nullptr, "Linear: null weight");
  MUFLOW_ASSERT(out_features > 0 && in_features > 0, "Linear: dims must be positive");
  OmpSingleThreadScope single_thread;
  impl_->in_features = in_features;
  impl_->out_features = out_features;
  impl_->has_bias = bias != nullptr;
  impl_->round_src_to_bf16 = true;
  try {
    impl_->weight_type = LinearWeightType::kBF16;
    impl_->build(weight_bf16, memory::data_type::bf16, bias);
    return;
  } catch (const dnnl::error&) {
    // No bf16 matmul on this CPU / oneDNN build: fall back to f32 below.
  }
  // Fallback: upcast the weights to f32 (exact) and keep rounding activations to bf16, so the
  // products are the same as in the bf16 path (bf16·bf16 is exact in f32); only the f32
  // accumulation order may differ.
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

Linear::~Linear() = default;
Linear::Linear(Linear&&) noexcept = default;
Linear& Linear::operator=(Linear&&) noexcept = default;

int64_t Linear::in_features() const { return impl_->in_features; }
int64_t Linear::out_features() const { return impl_->out_features; }
LinearWeightType Linear::weight_type() const { return impl_->weight_type; }

void Linear::forward(const float* x, int64_t num_rows, float* y) const {
  MUFLOW_ASSERT(num_rows >= 0, "Linear::forward: negative num_rows");
  if (num_rows == 0) return;
  MUFLOW_ASSERT(x != nullptr && y != nullptr, "Linear::forward: null x or y");
  const Impl& impl = *impl_;
  const int64_t in = impl.in_features;
  const int64_t out = impl.out_features;
  const bool bf16_src = impl.src_type == memory::data_type::bf16;

  OmpSingleThreadScope single_thread;
  dnnl::engine& engine = cpu_engine();
  thread_local dnnl::stream stream(cpu_engine());
  ThreadScratch& scratch = thread_scratch();

  const std::size_t src_elem = bf16_src ? sizeof(uint16_t) : sizeof(float);
  void* src_tile = scratch.src_tile.get(static_cast<std::size_t>(kLinearMTile * in) * src_elem);
  auto* dst_tile = static_cast<float*>(
      scratch.dst_tile.get(static_cast<std::size_t>(kLinearMTile * out) * sizeof(float)));
  void* scratchpad_ptr = scratch.scratchpad.get(impl.scratchpad_md.get_size());

  try {
    memory src(impl.src_md, engine, src_tile);
    memory dst(impl.dst_md, engine, dst_tile);
    memory scratchpad(impl.scratchpad_md, engine, scratchpad_ptr);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src},
                                         {DNNL_ARG_WEIGHTS, impl.packed_weights},
                                         {DNNL_ARG_DST, dst},
                                         {DNNL_ARG_SCRATCHPAD, scratchpad}};
    if (impl.has_bias) args.emplace(DNNL_ARG_BIAS, impl.bias);

    for (int64_t row = 0; row < num_rows; row += kLinearMTile) {
      const int64_t rows = std::min<int64_t>(kLinearMTile, num_rows - row);
      const float* x_tile = x + row * in;
      // Source: the rows of x themselves when a full f32 tile, else a padded copy.
      if (impl.round_src_to_bf16) {
        if (bf16_src) {
          auto* tile = static_cast<uint16_t*>(src_tile);
          f32_to_bf16_n(x_tile, rows * in, tile);
          std::fill(tile + rows * in, tile + kLinearMTile * in, uint16_t{0});
        } else {  // bf16 weights upcast to f32: round activations through bf16 too
          auto* tile = static_cast<float*>(src_tile);
          for (int64_t i = 0; i < rows * in; ++i) tile[i] = bf16_to_f32(f32_to_bf16(x_tile[i]));
          std::fill(tile + rows * in, tile + kLinearMTile * in, 0.0f);
        }
        src.set_data_handle(src_tile);
      } else if (rows == kLinearMTile) {
        src.set_data_handle(const_cast<float*>(x_tile));
      } else {
        auto* tile = static_cast<float*>(src_tile);
        std::memcpy(tile, x_tile, static_cast<std::size_t>(rows * in) * sizeof(float));
        std::fill(tile + rows * in, tile + kLinearMTile * in, 0.0f);
        src.set_data_handle(src_tile);
      }
      float* y_tile = y + row * out;
      dst.set_data_handle(rows == kLinearMTile ? y_tile : dst_tile);
      impl.matmul.execute(stream, args);
      if (rows != kLinearMTile) {
        std::memcpy(y_tile, dst_tile, static_cast<std::size_t>(rows * out) * sizeof(float));
      }
    }
    stream.wait();
  } catch (const dnnl::error& error) {
    dnnl_failure("Linear::forward: oneDNN matmul execution failed", error);
  }
}

}  // namespace muflow::kernels::cpu
