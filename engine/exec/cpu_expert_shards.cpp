#include "engine/exec/cpu_expert_shards.hpp"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "kernels/assert.hpp"

namespace muflow::engine::exec {
namespace {

// Rows [begin, end) of a row-major [rows, cols] tensor.
model::WeightTensor slice_rows(const model::WeightTensor& t, int64_t begin, int64_t end) {
  model::WeightTensor out;
  out.name = t.name;
  out.dtype = t.dtype;
  const int64_t cols = t.cols();
  out.shape = {end - begin, cols};
  if (t.dtype == model::DType::kF32) {
    out.f32.assign(t.f32.begin() + begin * cols, t.f32.begin() + end * cols);
  } else {
    out.bf16.assign(t.bf16.begin() + begin * cols, t.bf16.begin() + end * cols);
  }
  return out;
}

// Columns [begin, end) of a row-major [rows, cols] tensor.
model::WeightTensor slice_cols(const model::WeightTensor& t, int64_t begin, int64_t end) {
  model::WeightTensor out;
  out.name = t.name;
  out.dtype = t.dtype;
  const int64_t rows = t.rows(), cols = t.cols(), w = end - begin;
  out.shape = {rows, w};
  for (int64_t r = 0; r < rows; ++r) {
    if (t.dtype == model::DType::kF32) {
      out.f32.insert(out.f32.end(), t.f32.begin() + r * cols + begin,
                     t.f32.begin() + r * cols + end);
    } else {
      out.bf16.insert(out.bf16.end(), t.bf16.begin() + r * cols + begin,
                      t.bf16.begin() + r * cols + end);
    }
  }
  return out;
}

std::unique_ptr<kernels::cpu::ExpertFfn> make_shard_ffn(const model::ExpertWeights& e,
                                                        int64_t hidden, int64_t ffn,
                                                        kernels::cpu::Bf16Compute compute) {
  if (e.gate.dtype == model::DType::kBF16 && e.up.dtype == model::DType::kBF16 &&
      e.down.dtype == model::DType::kBF16) {
    return std::make_unique<kernels::cpu::ExpertFfn>(e.gate.bf16.data(), e.up.bf16.data(),
                                                     e.down.bf16.data(), hidden, ffn, compute);
  }
  std::vector<float> g = e.gate.to_f32(), u = e.up.to_f32(), d = e.down.to_f32();
  return std::make_unique<kernels::cpu::ExpertFfn>(g.data(), u.data(), d.data(), hidden, ffn);
}

}  // namespace

model::ExpertWeights slice_expert(const model::ExpertWeights& e, planning::ShardRange range) {
  return {slice_rows(e.gate, range.begin, range.end), slice_rows(e.up, range.begin, range.end),
          slice_cols(e.down, range.begin, range.end)};
}

absl::StatusOr<std::shared_ptr<const CpuExpertShards>> CpuExpertShards::prepare(
    const model::ModelWeights& weights, int64_t num_shards, kernels::cpu::Bf16Compute bf16_compute) {
  const model::ModelConfig& c = weights.config;
  absl::StatusOr<planning::ShardPlan> plan = planning::moeshard_plan(c.expert_ffn, num_shards);
  if (!plan.ok()) return plan.status();
  auto out = std::shared_ptr<CpuExpertShards>(new CpuExpertShards());
  out->hidden_ = c.hidden_size;
  out->plan_ = *plan;
  out->ffn_.resize(weights.blocks.size());
  for (size_t b = 0; b < weights.blocks.size(); ++b) {
    const std::vector<model::ExpertWeights>& experts = weights.blocks[b].experts;
    out->ffn_[b].resize(experts.size());
    for (size_t e = 0; e < experts.size(); ++e) {
      const model::ExpertWeights& ew = experts[e];
      const std::vector<int64_t> gate{c.expert_ffn, c.hidden_size}, down{c.hidden_size,
                                                                          c.expert_ffn};
      if (ew.gate.shape != gate || ew.up.shape != gate || ew.down.shape != down) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "block %d expert %d: gate/up/down shapes disagree with hidden %d, ffn %d", b, e,
            c.hidden_size, c.expert_ffn));
      }
      for (const planning::ShardRange& r : plan->ranges) {
        out->ffn_[b][e].push_back(r.size() == 0 ? nullptr
                                                : make_shard_ffn(slice_expert(ew, r),
                                                                 c.hidden_size, r.size(),
                                                                 bf16_compute));
      }
    }
  }
  return std::shared_ptr<const CpuExpertShards>(out);
}

void CpuExpertShards::forward(int64_t block, int64_t expert, int64_t shard, const float* x,
                              int64_t n, float* y) const {
  MUFLOW_ASSERT(block >= 0 && block < static_cast<int64_t>(ffn_.size()), "shard: bad block");
  MUFLOW_ASSERT(expert >= 0 && expert < static_cast<int64_t>(ffn_[block].size()),
                "shard: bad expert");
  MUFLOW_ASSERT(shard >= 0 && shard < num_shards(), "shard: bad shard index");
  const auto& f = ffn_[block][expert][shard];
  if (!f) {
    std::fill(y, y + n * hidden_, 0.f);
    return;
  }
  f->forward(x, n, y);
}

}  // namespace muflow::engine::exec
