#include "engine/exec/sample_rows.hpp"

#include "engine/serving/sampling.hpp"
#include "kernels/assert.hpp"

namespace muflow::engine::exec {

void sample_rows(const std::vector<dataflow::TokenMeta>& rows, const float* all_logits,
                 int64_t vocab, const std::vector<topology::SamplingSpec>& sampling,
                 std::vector<int32_t>* tokens, std::vector<std::vector<float>>* logits) {
  MUFLOW_ASSERT(sampling.size() == rows.size(), "sample_rows: one SamplingSpec per row");
  const auto n = static_cast<int64_t>(rows.size());
  tokens->assign(n, -1);
  logits->assign(n, {});
  for (int64_t i = 0; i < n; ++i) {
    const float* row = all_logits + i * vocab;
    if (rows[i].flags & dataflow::kSample) {
      (*tokens)[i] =
          serving::sample_token(row, vocab, sampling[i], rows[i].request_id, rows[i].position + 1);
    }
    if (rows[i].flags & dataflow::kNeedsLogits) (*logits)[i].assign(row, row + vocab);
  }
}

}  // namespace muflow::engine::exec
