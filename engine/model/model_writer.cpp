#include "engine/model/model_writer.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/model/hf_config.hpp"
#include "engine/model/model_loader.hpp"
#include "engine/model/safetensors.hpp"

namespace muflow::engine::model {

namespace {

namespace fs = std::filesystem;

int64_t stored_bytes(const WeightTensor& t) {
  return t.dtype == DType::kF32 ? static_cast<int64_t>(t.f32.size()) * 4
                                : static_cast<int64_t>(t.bf16.size()) * 2;
}

absl::Status write_text(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      return absl::InternalError(absl::StrCat(path.string(), ": write failed"));
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat(path.string(), ": ", ec.message()));
  return absl::OkStatus();
}

void remove_if_present(const fs::path& path) {
  std::error_code ec;
  fs::remove(path, ec);
}

}  // namespace

absl::Status write_hf_model(const ModelWeights& weights, const std::string& dir_name,
                            int64_t max_shard_bytes) {
  const ModelConfig& c = weights.config;
  if (absl::Status s = c.validate(); !s.ok()) return s;
  if (max_shard_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("write_hf_model: max_shard_bytes must be >= 0, got ", max_shard_bytes));
  }
  // Check every tensor before touching the disk.
  std::vector<ConstHfTensorSlot> slots = hf_tensor_slots(weights);
  bool any_bf16 = false;
  int64_t total_bytes = 0;
  for (const ConstHfTensorSlot& slot : slots) {
    if (slot.tensor == nullptr || slot.tensor->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("write_hf_model: tensor '", slot.name, "' is missing"));
    }
    if (slot.tensor->shape != slot.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "write_hf_model: tensor '", slot.name, "' has shape [",
          absl::StrJoin(slot.tensor->shape, ","), "], expected [", absl::StrJoin(slot.shape, ","),
          "]"));
    }
    any_bf16 = any_bf16 || slot.tensor->dtype == DType::kBF16;
    total_bytes += stored_bytes(*slot.tensor);
  }
  const fs::path dir(dir_name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat(dir_name, ": cannot create folder: ", ec.message()));
  }
  const nlohmann::json config = hf_config_json(c, any_bf16 ? "bfloat16" : "float32");
  if (absl::Status s = write_text(dir / "config.json", config.dump(2) + "\n"); !s.ok()) return s;

  // Safetensors files carry the HF name in WeightTensor::name; the slots are authoritative,
  // so write renamed shallow views only when a tensor's own name differs.
  std::vector<WeightTensor> renamed;
  renamed.reserve(slots.size());
  std::vector<const WeightTensor*> ordered;
  for (const ConstHfTensorSlot& slot : slots) {
    if (slot.tensor->name == slot.name) {
      ordered.push_back(slot.tensor);
    } else {
      renamed.push_back(*slot.tensor);
      renamed.back().name = slot.name;
      ordered.push_back(&renamed.back());
    }
  }
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";

  if (max_shard_bytes == 0 || total_bytes <= max_shard_bytes) {
    remove_if_present(index);
    return write_safetensors(single.string(), ordered, metadata);
  }
  std::vector<std::vector<const WeightTensor*>> shards(1);
  int64_t shard_bytes = 0;
  for (const WeightTensor* t : ordered) {
    const int64_t bytes = stored_bytes(*t);
    if (!shards.back().empty() && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(t);
    shard_bytes += bytes;
  }
  remove_if_present(single);
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name =
        absl::StrFormat("model-%05d-of-%05d.safetensors", i + 1, shards.size());
    if (absl::Status s = write_safetensors((dir / name).string(), shards[i], metadata); !s.ok()) {
      return s;
    }
    for (const WeightTensor* t : shards[i]) weight_map[t->name] = name;
  }
  nlohmann::json index_json = {{"metadata", {{"total_size", total_bytes}}},
                               {"weight_map", std::move(weight_map)}};
  return write_text(index, index_json.dump(2) + "\n");
}

}  // namespace muflow::engine::model
