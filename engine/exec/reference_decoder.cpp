#include "engine/exec/reference_decoder.hpp"

#include "absl/strings/str_format.h"
#include "engine/serving/sampling.hpp"

namespace muflow::engine::exec {

absl::StatusOr<ReferenceResult> reference_generate(const CpuModel& model,
                                                   const serving::Request& request,
                                                   const topology::SamplingSpec& sampling,
                                                   bool want_prompt_logits) {
  const model::ModelConfig& c = model.config();
  if (request.prompt.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("request %d: empty prompt", request.id));
  }
  for (size_t i = 0; i < request.prompt.size(); ++i) {
    if (request.prompt[i] < 0 || request.prompt[i] >= c.vocab_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "request %d: prompt token %d at index %d is outside the vocabulary [0, %d)",
          request.id, request.prompt[i], i, c.vocab_size));
    }
  }
  const int64_t H = c.hidden_size, K = c.num_topk;
  std::vector<serving::KvCache> caches(c.num_layers, serving::KvCache(c.num_kv_heads * c.head_dim));
  ReferenceResult result;
  result.expert_ids.resize(c.num_layers);

  std::vector<int32_t> input = request.prompt;
  int64_t position = 0;
  while (true) {
    const int64_t n = static_cast<int64_t>(input.size());
    std::vector<int64_t> rids(n, request.id), pos(n);
    for (int64_t i = 0; i < n; ++i) pos[i] = position + i;
    std::vector<float> h(n * H), x(n * H), w(n * K), y(n * H);
    std::vector<float> shared(c.shared_expert_ffn > 0 ? n * H : 0);
    std::vector<int32_t> ids(n * K);
    model.embed(input.data(), n, h.data());
    for (int64_t b = 0; b < c.num_layers; ++b) {
      AttentionOutputs out{x.data(), ids.data(), w.data(),
                           shared.empty() ? nullptr : shared.data()};
      if (absl::Status s = model.attention(b, caches[b], rids.data(), pos.data(), n, h.data(), out);
          !s.ok()) {
        return s;
      }
      result.expert_ids[b].insert(result.expert_ids[b].end(), ids.begin(), ids.end());
      std::vector<float> ys(K * n * H);  // [K][n][H]: rank j of token i
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < K; ++j) {
          model.expert(b, ids[i * K + j], x.data() + i * H, 1, ys.data() + (j * n + i) * H);
        }
      }
      for (int64_t i = 0; i < n; ++i) {
        std::vector<const float*> rows(K);
        for (int64_t j = 0; j < K; ++j) rows[j] = ys.data() + (j * n + i) * H;
        CpuModel::combine_row(h.data() + i * H, rows.data(), w.data() + i * K, K,
                              shared.empty() ? nullptr : shared.data() + i * H, H);
      }
    }
    std::vector<float> logits(n * c.vocab_size);
    model.logits(h.data(), n, logits.data());
    if (want_prompt_logits && position == 0) result.prompt_logits = logits;
    const int64_t last = position + n - 1;
    const int32_t next = serving::sample_token(logits.data() + (n - 1) * c.vocab_size, c.vocab_size,
                                               sampling, request.id, last + 1);
    result.output_ids.push_back(next);
    position += n;
    if (static_cast<int64_t>(result.output_ids.size()) >= request.max_new_tokens) break;
    if (sampling.stop_at_eos && next == c.eos_token_id) break;
    if (position >= c.max_position_embeddings) break;
    input = {next};
  }
  return result;
}

}  // namespace muflow::engine::exec
