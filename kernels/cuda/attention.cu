#include "kernels/assert.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/fma_chain.cuh"

namespace muflow::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kChunk = 1024;  // positions scored per pass (shared memory: 4 KiB)
constexpr int kDimsPerThread = kMaxAttentionHeadDim / kThreads;

__global__ void __launch_bounds__(kThreads)
    kv_write_kernel(float* pool, int64_t kv_width, const float* src, int64_t row_stride,
                    int64_t k_offset, const int32_t* page, const int32_t* slot) {
  const int64_t r = blockIdx.x;
  float* k_dst = pool + static_cast<int64_t>(page[r]) * 2 * kKvPageTokens * kv_width +
                 static_cast<int64_t>(slot[r]) * kv_width;
  float* v_dst = k_dst + kKvPageTokens * kv_width;
  const float* k_src = src + r * row_stride + k_offset;
  const float* v_src = k_src + kv_width;
  for (int64_t i = threadIdx.x; i < kv_width; i += kThreads) {
    k_dst[i] = k_src[i];
    v_dst[i] = v_src[i];
  }
}

__global__ void __launch_bounds__(kThreads)
    paged_attention_kernel(const float* qkv, int64_t row_stride, const float* pool,
                           const int32_t* page_table, const int32_t* table_start,
                           const int32_t* context_len, int64_t num_heads, int64_t num_kv_heads,
                           int64_t head_dim, bool vector_keys, float* out) {
  __shared__ __align__(16) float q[kMaxAttentionHeadDim];
  __shared__ float scores[kChunk];
  __shared__ float scratch[32];
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row = blockIdx.x, h = blockIdx.y;
  const int64_t kv_head = h / (num_heads / num_kv_heads);
  const int64_t kv_width = num_kv_heads * head_dim;
  const int64_t page_floats = 2 * kKvPageTokens * kv_width;
  const float* qr = qkv + row * row_stride + h * head_dim;
  for (int64_t d = tid; d < head_dim; d += kThreads) q[d] = qr[d];
  __syncthreads();
  const int64_t len = context_len[row];
  const int32_t* table = page_table + table_start[row];
  const float scale = 1.0f / sqrtf(static_cast<float>(head_dim));
  float running_max = -INFINITY, denominator = 0.f;
  float acc[kDimsPerThread];
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) acc[i] = 0.f;

  for (int64_t c0 = 0; c0 < len; c0 += kChunk) {
    const int cn = static_cast<int>(len - c0 < kChunk ? len - c0 : kChunk);
    float local_max = -INFINITY;
    for (int t = tid; t < cn; t += kThreads) {
      const int64_t pos = c0 + t;
      const float* key = pool + static_cast<int64_t>(table[pos / kKvPageTokens]) * page_floats +
                         (pos % kKvPageTokens) * kv_width + kv_head * head_dim;
      float dot = 0.f;
      if (vector_keys) {
        // The same chain over d ascending, its loads 16 bytes at a time (key rows are 16-byte
        // aligned: the pool is, and head_dim is a multiple of 4 floats), all in flight.
        const float4* k4 = reinterpret_cast<const float4*>(key);
        const float4* q4 = reinterpret_cast<const float4*>(q);
#pragma unroll 16
        for (int64_t d4 = 0; d4 < head_dim / 4; ++d4) {
          dot = fma_chain4(q4[d4], k4[d4], dot);
        }
      } else {
#pragma unroll 8
        for (int64_t d = 0; d < head_dim; ++d) dot = fmaf(q[d], key[d], dot);
      }
      scores[t] = dot * scale;
      local_max = fmaxf(local_max, scores[t]);
    }
    const float chunk_max = block_max(local_max, scratch);
    const float new_max = fmaxf(running_max, chunk_max);
    const float factor = expf(running_max - new_max);
    float local_sum = 0.f;
    for (int t = tid; t < cn; t += kThreads) {
      scores[t] = expf(scores[t] - new_max);
      local_sum += scores[t];
    }
    const float chunk_sum = block_sum(local_sum, scratch);  // also publishes scores[]
    denominator = denominator * factor + chunk_sum;
#pragma unroll
    for (int i = 0; i < kDimsPerThread; ++i) {
      acc[i] *= factor;
    }
    // Unrolled so that the loads of many positions are in flight; each acc[i] is still one
    // fmaf chain over the positions in order.
#pragma unroll 32
    for (int t = 0; t < cn; ++t) {
      const int64_t pos = c0 + t;
      const float* value = pool + static_cast<int64_t>(table[pos / kKvPageTokens]) * page_floats +
                           kKvPageTokens * kv_width + (pos % kKvPageTokens) * kv_width +
                           kv_head * head_dim;
      const float p = scores[t];
#pragma unroll
      for (int i = 0; i < kDimsPerThread; ++i) {
        const int64_t d = tid + i * kThreads;
        if (d < head_dim) acc[i] = fmaf(p, value[d], acc[i]);
      }
    }
    running_max = new_max;
    __syncthreads();  // scores[] is rewritten by the next chunk
  }
  float* o = out + row * num_heads * head_dim + h * head_dim;
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) {
    const int64_t d = tid + i * kThreads;
    if (d < head_dim) o[d] = acc[i] / denominator;
  }
}

}  // namespace

void kv_write(float* pool, int64_t kv_width, const float* src, int64_t row_stride, int64_t k_offset,
              const int32_t* page, const int32_t* slot, int64_t rows, cudaStream_t stream) {
  MUFLOW_ASSERT(rows >= 0 && kv_width > 0 && row_stride >= k_offset + 2 * kv_width,
                "cuda kv_write: bad sizes");
  if (rows == 0) return;
  kv_write_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      pool, kv_width, src, row_stride, k_offset, page, slot);
  MUFLOW_CUDA_LAUNCH_CHECK();
}

void paged_attention(const float* qkv, int64_t row_stride, const float* pool,
                     const int32_t* page_table, const int32_t* table_start,
                     const int32_t* context_len, int64_t rows, int64_t num_heads,
                     int64_t num_kv_heads, int64_t head_dim, float* out, cudaStream_t stream) {
  MUFLOW_ASSERT(rows >= 0 && num_heads > 0 && num_kv_heads > 0 && num_heads % num_kv_heads == 0,
                "cuda paged_attention: num_heads must be a multiple of num_kv_heads");
  MUFLOW_ASSERT(head_dim > 0 && head_dim <= kMaxAttentionHeadDim,
                "cuda paged_attention: head_dim must be in [1, 256]");
  MUFLOW_ASSERT(num_heads <= 65535, "cuda paged_attention: too many heads");
  if (rows == 0) return;
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(num_heads));
  // Keys read 16 bytes at a time where every key row is 16-byte aligned.
  const bool vector_keys = head_dim % 4 == 0 && reinterpret_cast<uintptr_t>(pool) % 16 == 0;
  paged_attention_kernel<<<grid, kThreads, 0, stream>>>(qkv, row_stride, pool, page_table,
                                                        table_start, context_len, num_heads,
                                                        num_kv_heads, head_dim, vector_keys, out);
  MUFLOW_CUDA_LAUNCH_CHECK();
}

}  // namespace muflow::kernels::cuda
