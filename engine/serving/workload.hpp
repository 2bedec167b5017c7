#pragma once
/// \file
/// Request sources (ARCHITECTURE.md §5): turns a topology's [workload] (engine/topology/topology.hpp
/// WorkloadSpec) into the list of requests the coordinator admits.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/serving/request.hpp"
#include "engine/serving/request_source.hpp"
#include "engine/topology/topology.hpp"

namespace muflow::engine::serving {

/// Text -> token ids (e.g. a SentencePiece tokenizer, BOS included if the model wants it).
using EncodeFn = std::function<std::vector<int32_t>(const std::string&)>;

/// Builds the requests of a workload, sorted by arrival (stable), ids 0..n-1.
///
/// - "prompts": one request per non-empty line of `spec.prompts_file` (trailing '\r' and
///   spaces stripped) or per entry of `spec.prompts`; arrival 0; `encode` turns text into
///   ids (null `encode` -> InvalidArgument "model has no tokenizer.model; give token ids");
///   max_new_tokens = spec.max_new_tokens.
/// - "ids": one request per `spec.prompt_ids` entry; arrival 0.
/// - "poisson": spec.num_requests requests; gaps between arrivals are exponential with mean
///   1 / spec.rate_per_s seconds (the first arrives one gap after 0); prompt length uniform
///   in [input_min, input_max], output length uniform in [output_min, output_max] (clamped
///   to spec.max_new_tokens when > 0); prompt ids uniform in [3, vocab_size) (ids 0..2 are
///   the usual unk/bos/eos). Random numbers: SplitMix64(spec.seed), per request in the
///   order gap, input length, output length, prompt ids (engine/splitmix64.hpp), so a seed
///   gives the same requests everywhere.
/// - "trace": rows of spec.trace_file (engine/serving/azure_trace.hpp), the first spec.max_requests
///   when > 0; arrival = trace seconds since the first row * spec.time_scale; prompt of
///   ContextTokens ids uniform in [3, vocab_size) (SplitMix64(spec.seed)), clamped to
///   spec.max_prompt_tokens when > 0; max_new_tokens = GeneratedTokens clamped to
///   spec.max_new_tokens when > 0.
///
/// `vocab_size`: the model's vocabulary; every prompt id must be < it. Errors:
/// InvalidArgument for an id outside [0, vocab_size) (naming prompt and position), a text
/// prompt that encodes to nothing, vocab_size <= 3 for random prompts, max_new_tokens < 1
/// for prompts/ids, an unknown kind or a malformed trace row (file and line); NotFound for
/// a missing prompts or trace file. Pure function of its inputs; any thread.
/// InvalidArgument as well for more than topology::kMaxWorkloadRequests requests (a
/// WorkloadSpec built in code; the topology parser refuses those already): use
/// make_request_source, which holds none of them up front.
absl::StatusOr<std::vector<Request>> make_requests(const topology::WorkloadSpec& spec,
                                                   int64_t vocab_size, const EncodeFn& encode);

/// The same requests as make_requests, as a source that generates each when taken: "poisson"
/// holds O(1) state, "trace" 48 bytes per row read (prompts are drawn when taken, from the
/// same SplitMix64 stream positions), "prompts" and "ids" are built at once (they are given in
/// full). The parameters are checked here (same errors as make_requests); the requests then
/// come without failing. The source is not thread-safe (one owner pulls from it).
absl::StatusOr<RequestSourcePtr> make_request_source(const topology::WorkloadSpec& spec,
                                                   int64_t vocab_size, const EncodeFn& encode);

}  // namespace muflow::engine::serving
