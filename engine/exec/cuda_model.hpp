#pragma once
/// \file
/// A model's weights on one GPU, and the per-stage math of an MoE decoder there (issue #20).
/// The cuda counterpart of cpu_model.hpp: same stages, same batch invariance (every kernel
/// computes a row in a fixed order, kernels/cuda/), device pointers in and out.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_weights.hpp"
#include "kernels/assert.hpp"
#include "kernels/cuda/device_buffer.hpp"

namespace muflow::engine::exec {

/// A weight matrix [rows, cols] (HF layout: out × in) on the GPU, bf16 bits or f32.
struct CudaMatrix {
  kernels::cuda::DeviceBuffer data;
  int64_t rows = 0, cols = 0;
  bool bf16 = false;
  const void* ptr() const { return data.get(); }
};

/// Device scratch of one caller (an executor): buffers grown on demand, never shrunk. Owned
/// and used by one thread at a time.
class CudaScratch {
 public:
  static constexpr int kSlots = 20;
  /// A buffer of at least `bytes`, slot `slot` (< kSlots; CudaModel's own functions use 12–15);
  /// contents undefined. Errors: the allocation's (out of memory), as a status naming the bytes
  /// asked for.
  absl::StatusOr<void*> get(int slot, std::size_t bytes);

 private:
  kernels::cuda::DeviceBuffer slots_[kSlots];
};

/// Weights of one model on one GPU. Built once by `prepare` (on the calling thread, which it
/// leaves on `gpu`), immutable afterwards; const methods may be called concurrently from any
/// thread with distinct streams and scratch (the executors of one GPU share one model).
class CudaModel {
 public:
  /// Uploads every weight: attention q|k|v fused (and its bias), o, the router (always f32),
  /// every expert's gate|up fused and down, the shared expert, the LM head, norms and the
  /// embedding table (f32). Matrices keep their dtype: bf16 weights run on tensor cores with
  /// activations rounded to bf16 first (the cpu Linear's bf16 contract), f32 weights on the
  /// f32 fixed-order GEMM. Errors: InvalidArgument for shapes that disagree with the config;
  /// ResourceExhausted when the GPU's memory is too small (bytes named); Internal for other
  /// CUDA errors.
  static absl::StatusOr<std::shared_ptr<const CudaModel>> prepare(
      const model::ModelWeights& weights, int gpu);

  const model::ModelConfig& config() const { return config_; }
  int gpu() const { return gpu_; }
  /// "bf16" when the experts' weights are bf16, else "f32".
  const char* weights_dtype() const { return weights_dtype_; }
  /// Bytes of weights on the GPU.
  int64_t device_bytes() const { return device_bytes_; }

  /// h [n, hidden] f32 = embed[ids]; ids: [n] int32, each in [0, vocab) (the caller's check:
  /// workloads validate prompts). All device pointers; asynchronous on `stream`, which must
  /// belong to this model's GPU (as for every method below).
  void embed(const int32_t* ids, int64_t n, float* h, cudaStream_t stream) const;

  /// y [n, out] f32 = x [n, in] f32 · Wᵀ (+ bias [out] f32, may be null) for any matrix of this
  /// model (in = w.cols, out = w.rows): the f32 GEMM, or x rounded to bf16 into scratch slot
  /// `scratch_slot` then the bf16 GEMM (kernels/cuda/gemm.hpp). Errors: ResourceExhausted when
  /// the scratch cannot grow.
  absl::Status linear(const CudaMatrix& w, const float* bias, const float* x, int64_t n, float* y,
                      CudaScratch& scratch, int scratch_slot, cudaStream_t stream) const;

  /// One expert's SwiGLU FFN on the GPU (HF `MixtralBlockSparseTop2MLP`): y [n, hidden] from
  /// x [n, hidden] (device, f32). With a range (MoEShard §3.2, engine/planning/moeshard_plan.hpp)
  /// only intermediate units [range_begin, range_end) of it: the shard's partial output
  /// (zeros for an empty range); range_end −1 = the whole FFN. Preconditions (checked at
  /// prepare and by the moeshard backend, aborting here if broken): block < num_layers,
  /// expert < num_experts. Errors: InvalidArgument unless 0 ≤ range_begin ≤ range_end ≤ ffn
  /// and, with bf16 weights, range_begin and the range's width are multiples of 8 (the bf16
  /// GEMM's k alignment); ResourceExhausted when the scratch cannot grow; Internal for another
  /// CUDA error.
  absl::Status expert(int64_t block, int64_t expert, const float* x, int64_t n, float* y,
                      CudaScratch& scratch, cudaStream_t stream, int64_t range_begin = 0,
                      int64_t range_end = -1) const;
  /// The same SwiGLU FFN on any gate|up [2·ffn, hidden] and down [hidden, ffn] pair (the
  /// shared expert's too).
  absl::Status ffn(const CudaMatrix& gate_up, const CudaMatrix& down, const float* x, int64_t n,
                   float* y, CudaScratch& scratch, cudaStream_t stream, int64_t range_begin = 0,
                   int64_t range_end = -1) const;

  /// Final RMSNorm and LM head: logits [n, vocab] f32 from h [n, hidden] f32 (device; h
  /// unchanged). Errors: ResourceExhausted when the scratch cannot grow.
  absl::Status logits(const float* h, int64_t n, float* logits, CudaScratch& scratch,
                      cudaStream_t stream) const;

  /// One decoder block's weights on the GPU, in the dtype `weights_dtype()` names except where
  /// a field says f32 (qd = heads·head_dim, kvd = kv_heads·head_dim).
  struct Block {
    CudaMatrix qkv;     ///< [qd + 2·kvd, hidden]: q, k and v rows fused
    CudaMatrix o;       ///< [hidden, qd]
    CudaMatrix router;  ///< [num_experts, hidden], always f32 (the cpu router's bits)
    kernels::cuda::DeviceBuffer qkv_bias;  ///< [qd + 2·kvd] f32, empty without attention bias
    kernels::cuda::DeviceBuffer input_norm, post_attn_norm;  ///< [hidden] f32
    std::vector<CudaMatrix> gate_up;                         ///< [num_experts] of [2·ffn, hidden]
    std::vector<CudaMatrix> down;                            ///< [num_experts] of [hidden, ffn]
    /// The shared expert (Qwen2-MoE): [2·shared_ffn, hidden] and [hidden, shared_ffn]; empty
    /// without one.
    CudaMatrix shared_gate_up, shared_down;
    kernels::cuda::DeviceBuffer shared_gate;  ///< [hidden] f32, empty without shared expert
  };
  /// Block `b` (0 ≤ b < num_layers: an internal invariant, aborting when broken).
  const Block& block(int64_t b) const {
    MUFLOW_ASSERT(b >= 0 && b < static_cast<int64_t>(blocks_.size()),
                  "CudaModel::block: no such block");
    return blocks_[static_cast<size_t>(b)];
  }

 private:
  CudaModel() = default;
  model::ModelConfig config_;
  int gpu_ = 0;
  const char* weights_dtype_ = "f32";
  int64_t device_bytes_ = 0;
  std::vector<Block> blocks_;
  CudaMatrix lm_head_;
  kernels::cuda::DeviceBuffer embed_, final_norm_;
};

/// A CUDA error as a status: ResourceExhausted for out of memory, else Internal; `what`
/// names the operation.
absl::Status cuda_status(cudaError_t e, std::string_view what);

}  // namespace muflow::engine::exec
