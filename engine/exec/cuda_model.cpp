#include "engine/exec/cuda_model.hpp"

#include <string>

#include "absl/strings/str_format.h"
#include "engine/model/weight_shapes.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/rms_norm.hpp"
#include "kernels/cuda/router.hpp"
#include "kernels/cuda/swiglu.hpp"

namespace muflow::engine::exec {
namespace {

namespace kc = kernels::cuda;

// Scratch slots of the model's own functions (CudaScratch); executors use the others.
constexpr int kSlotLinearInput = 12;  // x rounded to bf16 for a bf16 linear
constexpr int kSlotGateUp = 13;       // [n, 2·ffn] f32
constexpr int kSlotActivation = 14;   // [n, ffn] f32 or bf16
constexpr int kSlotNormed = 15;       // [n, hidden] f32 (final norm)

class Uploader {
 public:
  explicit Uploader(int64_t* bytes) : bytes_(bytes) {}

  absl::Status floats(const std::vector<float>& v, kc::DeviceBuffer* out) {
    return copy(v.data(), v.size() * sizeof(float), out);
  }

  // Rows of several tensors stacked into one matrix: bf16 when all are bf16, else f32.
  absl::Status matrix(const std::vector<const model::WeightTensor*>& parts, CudaMatrix* out) {
    const model::WeightTensor all = model::concat_rows(parts);
    out->rows = all.rows();
    out->cols = all.cols();
    out->bf16 = all.dtype == model::DType::kBF16;
    return out->bf16 ? copy(all.bf16.data(), all.bf16.size() * sizeof(uint16_t), &out->data)
                     : copy(all.f32.data(), all.f32.size() * sizeof(float), &out->data);
  }

  absl::Status f32_matrix(const model::WeightTensor& t, CudaMatrix* out) {
    out->rows = t.rows();
    out->cols = t.cols();
    out->bf16 = false;
    return floats(t.to_f32(), &out->data);
  }

 private:
  absl::Status copy(const void* src, std::size_t bytes, kc::DeviceBuffer* out) {
    if (cudaError_t e = out->allocate(bytes); e != cudaSuccess) {
      return cuda_status(
          e, absl::StrFormat("allocating %d bytes of weights (%d already on the GPU)", bytes,
                             *bytes_));
    }
    if (bytes > 0) {
      if (cudaError_t e = cudaMemcpy(out->get(), src, bytes, cudaMemcpyHostToDevice);
          e != cudaSuccess) {
        return cuda_status(e, "uploading weights");
      }
    }
    *bytes_ += static_cast<int64_t>(bytes);
    return absl::OkStatus();
  }
  int64_t* bytes_;
};

// Whether any matrix the model uploads is bf16.
bool any_bf16(const model::ModelWeights& w) {
  auto bf16 = [](const model::WeightTensor& t) { return t.dtype == model::DType::kBF16; };
  if (bf16(w.lm_head)) return true;
  for (const model::BlockWeights& b : w.blocks) {
    if (bf16(b.q) || bf16(b.k) || bf16(b.v) || bf16(b.o) || bf16(b.shared_expert.gate) ||
        bf16(b.shared_expert.up) || bf16(b.shared_expert.down)) {
      return true;
    }
    for (const model::ExpertWeights& e : b.experts) {
      if (bf16(e.gate) || bf16(e.up) || bf16(e.down)) return true;
    }
  }
  return false;
}

}  // namespace

absl::Status cuda_status(cudaError_t e, std::string_view what) {
  cudaGetLastError();  // clear a non-sticky error
  const std::string msg =
      absl::StrFormat("CUDA: %s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
  return e == cudaErrorMemoryAllocation ? absl::ResourceExhaustedError(msg)
                                        : absl::InternalError(msg);
}

absl::StatusOr<void*> CudaScratch::get(int slot, std::size_t bytes) {
  kc::DeviceBuffer& b = slots_[slot];
  if (cudaError_t e = b.reserve(bytes); e != cudaSuccess) {
    return cuda_status(e, absl::StrFormat("allocating %d bytes of activations", bytes));
  }
  return b.get();
}

absl::StatusOr<std::shared_ptr<const CudaModel>> CudaModel::prepare(
    const model::ModelWeights& weights, int gpu) {
  if (absl::Status s = model::check_weight_shapes(weights); !s.ok()) return s;
  const model::ModelConfig& c = weights.config;
  if (cudaError_t e = cudaSetDevice(gpu); e != cudaSuccess) {
    return cuda_status(e, absl::StrFormat("selecting GPU %d", gpu));
  }
  const int64_t H = c.hidden_size, qd = c.num_heads * c.head_dim;
  // What the kernels take, checked before anything is uploaded.
  if (c.head_dim > kc::kMaxAttentionHeadDim || c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cuda backend: head_dim must be even and at most %d (got %d)",
                        kc::kMaxAttentionHeadDim, c.head_dim));
  }
  if (c.num_experts > kc::kMaxRouterExperts) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cuda backend: at most %d experts per block (got %d)",
                        kc::kMaxRouterExperts, c.num_experts));
  }
  // bf16 GEMMs read 16-byte chunks: every k (hidden, ffn, q width) must be a multiple of 8.
  if (any_bf16(weights) && (H % 8 != 0 || c.expert_ffn % 8 != 0 || qd % 8 != 0 ||
                            (c.shared_expert_ffn > 0 && c.shared_expert_ffn % 8 != 0))) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cuda backend: bf16 weights need hidden_size, intermediate_size (and the shared "
        "expert's) and heads·head_dim to be multiples of 8 (got %d, %d, %d, %d)",
        H, c.expert_ffn, c.shared_expert_ffn, qd));
  }
  auto m = std::shared_ptr<CudaModel>(new CudaModel());
  m->config_ = c;
  m->gpu_ = gpu;
  Uploader up(&m->device_bytes_);
  m->blocks_.resize(c.num_layers);
  for (int64_t b = 0; b < c.num_layers; ++b) {
    const model::BlockWeights& bw = weights.blocks[b];
    Block& blk = m->blocks_[b];
    if (absl::Status s = up.floats(bw.input_norm.to_f32(), &blk.input_norm); !s.ok()) return s;
    if (absl::Status s = up.floats(bw.post_attn_norm.to_f32(), &blk.post_attn_norm); !s.ok()) {
      return s;
    }
    if (absl::Status s = up.matrix({&bw.q, &bw.k, &bw.v}, &blk.qkv); !s.ok()) return s;
    absl::StatusOr<std::vector<float>> bias = model::fused_qkv_bias(c, bw, b);
    if (!bias.ok()) return bias.status();
    if (!bias->empty()) {
      if (absl::Status s = up.floats(*bias, &blk.qkv_bias); !s.ok()) return s;
    }
    if (absl::Status s = up.matrix({&bw.o}, &blk.o); !s.ok()) return s;
    // Routing in f32, whatever the weights' dtype.
    if (absl::Status s = up.f32_matrix(bw.router, &blk.router); !s.ok()) return s;
    blk.gate_up.resize(c.num_experts);
    blk.down.resize(c.num_experts);
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const model::ExpertWeights& ew = bw.experts[e];
      if (ew.gate.dtype == model::DType::kBF16) m->weights_dtype_ = "bf16";
      if (absl::Status s = up.matrix({&ew.gate, &ew.up}, &blk.gate_up[e]); !s.ok()) return s;
      if (absl::Status s = up.matrix({&ew.down}, &blk.down[e]); !s.ok()) return s;
    }
    if (c.shared_expert_ffn > 0) {
      const model::ExpertWeights& se = bw.shared_expert;
      if (absl::Status s = up.matrix({&se.gate, &se.up}, &blk.shared_gate_up); !s.ok()) return s;
      if (absl::Status s = up.matrix({&se.down}, &blk.shared_down); !s.ok()) return s;
      if (absl::Status s = up.floats(bw.shared_expert_gate.to_f32(), &blk.shared_gate); !s.ok()) {
        return s;
      }
    }
  }
  if (absl::Status s = up.matrix({&weights.lm_head}, &m->lm_head_); !s.ok()) return s;
  if (absl::Status s = up.floats(weights.embed.to_f32(), &m->embed_); !s.ok()) return s;
  if (absl::Status s = up.floats(weights.final_norm.to_f32(), &m->final_norm_); !s.ok()) return s;
  return std::shared_ptr<const CudaModel>(m);
}

void CudaModel::embed(const int32_t* ids, int64_t n, float* h, cudaStream_t stream) const {
  kc::embed_gather(embed_.as<float>(), ids, n, config_.hidden_size, h, stream);
}

absl::Status CudaModel::linear(const CudaMatrix& w, const float* bias, const float* x, int64_t n,
                               float* y, CudaScratch& scratch, int scratch_slot,
                               cudaStream_t stream) const {
  if (n == 0) return absl::OkStatus();
  if (!w.bf16) {
    kc::gemm_f32(x, w.cols, w.data.as<float>(), w.cols, bias, y, w.rows, n, w.rows, w.cols, stream);
    return absl::OkStatus();
  }
  absl::StatusOr<void*> xb = scratch.get(scratch_slot, n * w.cols * sizeof(uint16_t));
  if (!xb.ok()) return xb.status();
  kc::round_to_bf16(x, n * w.cols, static_cast<uint16_t*>(*xb), stream);
  kc::gemm_bf16(static_cast<const uint16_t*>(*xb), w.cols, w.data.as<uint16_t>(), w.cols, bias, y,
                w.rows, n, w.rows, w.cols, stream);
  return absl::OkStatus();
}

absl::Status CudaModel::expert(int64_t block, int64_t expert, const float* x, int64_t n, float* y,
                               CudaScratch& scratch, cudaStream_t stream, int64_t range_begin,
                               int64_t range_end) const {
  const Block& blk = this->block(block);
  MUFLOW_ASSERT(expert >= 0 && expert < static_cast<int64_t>(blk.gate_up.size()),
                "CudaModel::expert: no such expert");
  return ffn(blk.gate_up[static_cast<size_t>(expert)], blk.down[static_cast<size_t>(expert)], x, n,
             y, scratch, stream, range_begin, range_end);
}

absl::Status CudaModel::ffn(const CudaMatrix& gu, const CudaMatrix& dn, const float* x, int64_t n,
                            float* y, CudaScratch& scratch, cudaStream_t stream,
                            int64_t range_begin, int64_t range_end) const {
  if (n == 0) return absl::OkStatus();
  const int64_t H = config_.hidden_size, F = gu.rows / 2;
  const int64_t b = range_begin, e = range_end < 0 ? F : range_end, f = e - b;
  // A range outside the FFN would read past the weights; bf16 GEMMs need k and row offsets in
  // multiples of 8 (16-byte copies).
  if (b < 0 || b > e || e > F) {
    return absl::InvalidArgumentError(
        absl::StrFormat("CudaModel::ffn: intermediate range [%d, %d) outside [0, %d]", b, e, F));
  }
  if ((gu.bf16 || dn.bf16) && (b % 8 != 0 || f % 8 != 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "CudaModel::ffn: with bf16 weights the range [%d, %d) must start and span multiples of 8",
        b, e));
  }
  if (f == 0) {  // an empty MoEShard shard: its partial output is zero
    if (cudaError_t err = cudaMemsetAsync(y, 0, n * H * sizeof(float), stream);
        err != cudaSuccess) {
      return cuda_status(err, "zeroing an empty shard's output");
    }
    return absl::OkStatus();
  }
  // Each matrix in its own dtype (gate|up and down may differ).
  const std::size_t gu_elem = gu.bf16 ? sizeof(uint16_t) : sizeof(float);
  const std::size_t dn_elem = dn.bf16 ? sizeof(uint16_t) : sizeof(float);
  const auto* gate_rows = static_cast<const unsigned char*>(gu.ptr()) + b * H * gu_elem;
  const auto* up_rows = static_cast<const unsigned char*>(gu.ptr()) + (F + b) * H * gu_elem;
  const auto* down_cols = static_cast<const unsigned char*>(dn.ptr()) + b * dn_elem;
  absl::StatusOr<void*> gate_up = scratch.get(kSlotGateUp, n * 2 * f * sizeof(float));
  if (!gate_up.ok()) return gate_up.status();
  absl::StatusOr<void*> act = scratch.get(kSlotActivation, n * f * sizeof(float));
  if (!act.ok()) return act.status();
  auto* g = static_cast<float*>(*gate_up);
  // gate and up halves side by side in one [n, 2f] buffer (ld 2f): the whole expert's fused
  // [2F, H] weight in one GEMM, a shard's two row ranges in two.
  const bool whole = b == 0 && e == F;
  if (!gu.bf16) {
    if (whole) {
      kc::gemm_f32(x, H, static_cast<const float*>(gu.ptr()), H, nullptr, g, 2 * F, n, 2 * F, H,
                   stream);
    } else {
      kc::gemm_f32(x, H, reinterpret_cast<const float*>(gate_rows), H, nullptr, g, 2 * f, n, f, H,
                   stream);
      kc::gemm_f32(x, H, reinterpret_cast<const float*>(up_rows), H, nullptr, g + f, 2 * f, n, f, H,
                   stream);
    }
  } else {
    absl::StatusOr<void*> xb = scratch.get(kSlotLinearInput, n * H * sizeof(uint16_t));
    if (!xb.ok()) return xb.status();
    auto* xbf = static_cast<uint16_t*>(*xb);
    kc::round_to_bf16(x, n * H, xbf, stream);
    if (whole) {
      kc::gemm_bf16(xbf, H, static_cast<const uint16_t*>(gu.ptr()), H, nullptr, g, 2 * F, n, 2 * F,
                    H, stream);
    } else {
      kc::gemm_bf16(xbf, H, reinterpret_cast<const uint16_t*>(gate_rows), H, nullptr, g, 2 * f, n,
                    f, H, stream);
      kc::gemm_bf16(xbf, H, reinterpret_cast<const uint16_t*>(up_rows), H, nullptr, g + f, 2 * f, n,
                    f, H, stream);
    }
  }
  if (!dn.bf16) {
    kc::swiglu(g, n, f, static_cast<float*>(*act), nullptr, stream);
    kc::gemm_f32(static_cast<const float*>(*act), f, reinterpret_cast<const float*>(down_cols), F,
                 nullptr, y, H, n, H, f, stream);
  } else {
    auto* ab = static_cast<uint16_t*>(*act);
    kc::swiglu(g, n, f, nullptr, ab, stream);
    kc::gemm_bf16(ab, f, reinterpret_cast<const uint16_t*>(down_cols), F, nullptr, y, H, n, H, f,
                  stream);
  }
  return absl::OkStatus();
}

absl::Status CudaModel::logits(const float* h, int64_t n, float* logits, CudaScratch& scratch,
                               cudaStream_t stream) const {
  if (n == 0) return absl::OkStatus();
  const int64_t H = config_.hidden_size;
  absl::StatusOr<void*> normed = scratch.get(kSlotNormed, n * H * sizeof(float));
  if (!normed.ok()) return normed.status();
  kc::rms_norm(h, final_norm_.as<float>(), n, H, config_.rms_norm_eps, static_cast<float*>(*normed),
               stream);
  return linear(lm_head_, nullptr, static_cast<const float*>(*normed), n, logits, scratch,
                kSlotLinearInput, stream);
}

}  // namespace muflow::engine::exec
