#include "http/client/topology_requests.hpp"

#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/model/hf_config.hpp"
#include "engine/model/tokenizer.hpp"
#include "engine/serving/workload.hpp"

namespace muflow::http::client {

absl::StatusOr<std::vector<engine::serving::Request>> make_topology_requests(
    const engine::topology::Topology& topology) {
  int64_t vocab_size = 0;
  std::shared_ptr<engine::model::Tokenizer> tokenizer;
  if (!topology.model.path.empty()) {
    absl::StatusOr<engine::model::ModelConfig> config =
        engine::model::parse_hf_config(topology.model.path + "/config.json");
    if (!config.ok()) return config.status();
    vocab_size = config->vocab_size;
    absl::StatusOr<std::unique_ptr<engine::model::Tokenizer>> tok =
        engine::model::Tokenizer::load_from_model_dir(topology.model.path);
    if (tok.ok()) {
      tokenizer = std::move(*tok);
    } else if (!absl::IsNotFound(tok.status())) {
      return tok.status();
    }
  } else if (topology.model.synthetic) {
    vocab_size = topology.model.synthetic->vocab_size;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(topology.source,
                     ": [model] needs 'path', 'preset' or synthetic dims to size the "
                     "workload's prompts"));
  }
  engine::serving::EncodeFn encode;
  if (tokenizer) {
    encode = [tokenizer](const std::string& text) { return tokenizer->encode(text, true); };
  }
  return engine::serving::make_requests(topology.workload, vocab_size, encode);
}

}  // namespace muflow::http::client
