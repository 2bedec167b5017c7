#pragma once
/// \file
/// The requests of a topology's `[workload]` without loading the model: what `muflow bench
/// --url` sends to a server, equal to what `muflow run` serves in-process for the same file
/// (same generator, same seed, same token ids).

#include <vector>

#include "absl/status/statusor.h"
#include "engine/serving/request.hpp"
#include "engine/topology/topology.hpp"

namespace muflow::http::client {

/// engine::serving::make_requests(topology.workload, vocab, encode) with the vocabulary size
/// read from the `[model]` table alone (a folder's config.json, or the synthetic dims or
/// preset) and, for text prompts, the folder's tokenizer.model (BOS added, as
/// actors::Server::make_workload does). No weights are read.
/// Errors: InvalidArgument when `[model]` gives neither a path nor dims/preset; the
/// config.json and tokenizer loaders' errors (NotFound naming the file; a missing
/// tokenizer.model is only an error for text prompts, as in make_requests); make_requests'
/// errors. Any thread.
absl::StatusOr<std::vector<engine::serving::Request>> make_topology_requests(
    const engine::topology::Topology& topology);

}  // namespace muflow::http::client
