#pragma once
/// \file
/// Internal pieces of the topology parser shared by engine/topology*.cpp. Not a public API:
/// other folders use engine/topology.hpp.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "engine/toml_reader.hpp"
#include "engine/topology.hpp"

namespace muflow::engine::topology_detail {

/// `path` made absolute against `base_dir` (itself absolute) and lexically normalised.
std::string resolve_path(const std::filesystem::path& base_dir, std::string_view path);

/// NotFound "FILE:LINE: key 'k': no such file '/abs/path'" unless `path` is a regular file
/// (`want_folder` false) or a folder (`want_folder` true).
absl::Status require_existing(const TomlTableReader& reader, std::string_view key,
                              const std::string& path, bool want_folder);

/// Parses the [workload] table into `out` (which holds the defaults). `vocab_size` > 0
/// checks token ids of kind = "ids" against the model's vocabulary (0 = not known yet).
absl::Status parse_workload_table(const TomlTableReader& reader,
                                  const std::filesystem::path& base_dir, int64_t vocab_size,
                                  WorkloadSpec* out);

}  // namespace muflow::engine::topology_detail
