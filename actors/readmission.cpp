#include "actors/readmission.hpp"

#include <algorithm>

namespace muflow::actors {

engine::serving::Request readmission(ResumableRequest& r, double offset_s) {
  engine::serving::Request out = r.request;
  out.arrival_s = std::max(0.0, r.request.arrival_s - offset_s);
  out.prompt.insert(out.prompt.end(), r.generated.begin(), r.generated.end());
  out.max_new_tokens -= static_cast<int64_t>(r.generated.size());
  r.resumed_after = r.generated.size();
  return out;
}

RequestOutput merged_output(const ResumableRequest* r, const RequestOutput& out, double offset_s,
                            std::chrono::steady_clock::time_point origin) {
  RequestOutput merged = out;
  merged.arrival_s = out.arrival_s + offset_s;
  merged.finish_s = out.finish_s >= 0 ? out.finish_s + offset_s : -1;
  merged.first_token_s = out.first_token_s >= 0 ? out.first_token_s + offset_s : -1;
  if (r == nullptr) return merged;
  merged.arrival_s = r->request.arrival_s;
  merged.prompt = r->request.prompt;
  merged.prompt_text = r->request.prompt_text;
  if (r->resumed_after == 0) return merged;
  merged.output.assign(r->generated.begin(),
                       r->generated.begin() + static_cast<ptrdiff_t>(r->resumed_after));
  merged.output.insert(merged.output.end(), out.output.begin(), out.output.end());
  merged.first_token_s = std::chrono::duration<double>(r->first_token_at - origin).count();
  // The prompt's rows come first in the re-prefill's logits.
  if (!merged.prompt_logits.empty() && !out.prompt.empty()) {
    const size_t vocab = out.prompt_logits.size() / out.prompt.size();
    merged.prompt_logits.resize(r->request.prompt.size() * vocab);
  }
  return merged;
}

}  // namespace muflow::actors
