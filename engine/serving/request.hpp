#pragma once
/// \file
/// One inference request as the coordinator admits it (built by engine/serving/workload.hpp).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/topology/topology.hpp"

namespace muflow::engine::serving {

/// A request: a prompt (token ids) that arrives at `arrival_s` and asks for up to
/// `max_new_tokens` generated tokens. Plain value; owned by whoever holds it (the request
/// source hands it to the coordinator actor).
struct Request {
  int64_t id = 0;                 ///< 0..n-1 in arrival order within one workload
  double arrival_s = 0.0;         ///< seconds since the start of the run (>= 0)
  std::vector<int32_t> prompt;    ///< [num_prompt_tokens] token ids, each in [0, vocab)
  int64_t max_new_tokens = 0;     ///< tokens to generate (>= 1); fewer if EOS stops it
  std::string prompt_text;        ///< source text for text prompts; empty for id prompts
  bool return_prompt_logits = false;  ///< also return logits of every prompt position
  /// This request's temperature / top-p / seed / stop-at-EOS, overriding the topology's
  /// `[sampling]` (an HTTP request's parameters); unset: the topology's.
  std::optional<topology::SamplingSpec> sampling;
};

}  // namespace muflow::engine::serving
