#include "transport/link_model.hpp"

#include <array>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/assert.hpp"

namespace muflow::transport {
namespace {

constexpr std::array<std::pair<std::string_view, LinkClass>, 12> kPresets{{
    {"nvlink4-h100", links::kNvlink4H100},
    {"nvlink4-h200", links::kNvlink4H200},
    {"nvlink3-a100", links::kNvlink3A100},
    {"nvlink2-v100", links::kNvlink2V100},
    {"pcie3-x16", links::kPcie3x16},
    {"pcie4-x16", links::kPcie4x16},
    {"pcie5-x16", links::kPcie5x16},
    {"ib-100g", links::kIb100G},
    {"ib-200g", links::kIb200G},
    {"ib-400g", links::kIb400G},
    {"eth-100g", links::kEth100G},
    {"in-process", links::kInProcess},
}};

}  // namespace

absl::StatusOr<LinkClass> link_class_by_name(std::string_view name) {
  for (const auto& [preset, link] : kPresets) {
    if (preset == name) {
      return link;
    }
  }
  return absl::NotFoundError(absl::StrCat("unknown link class '", std::string(name),
                                          "'; known: ", absl::StrJoin(link_class_names(), ", ")));
}

std::vector<std::string> link_class_names() {
  std::vector<std::string> names;
  names.reserve(kPresets.size());
  for (const auto& preset : kPresets) {
    names.emplace_back(preset.first);
  }
  return names;
}

absl::Status validate_link_class(const LinkClass& link, std::string_view what_view) {
  const std::string what(what_view);  // this absl's StrCat takes no std::string_view
  // Written so that NaN fails both tests.
  if (!(link.bandwidth_bytes_per_s > 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": bandwidth must be > 0 bytes/s, got ", link.bandwidth_bytes_per_s));
  }
  if (!(link.latency_s >= 0.0) || std::isinf(link.latency_s)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": latency must be finite and >= 0 s, got ", link.latency_s));
  }
  return absl::OkStatus();
}

double transfer_seconds(const LinkClass& link, int64_t bytes) {
  MUFLOW_ASSERT(bytes >= 0, "transfer of a negative number of bytes");
  if (bytes == 0) {
    return 0.0;
  }
  return link.latency_s + static_cast<double>(bytes) / link.bandwidth_bytes_per_s;
}

}  // namespace muflow::transport
