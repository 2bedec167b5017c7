#pragma once
/// \file
/// Internal pieces of the topology parser shared by engine/topology/topology*.cpp. Not a public
/// API: other folders use engine/topology/topology.hpp.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "engine/topology/toml_reader.hpp"
#include "engine/topology/topology.hpp"

// Runs `expr` (an absl::Status expression) and returns it from the enclosing function if
// it is an error.
#define MUFLOW_TOPO_RETURN_IF_ERROR(expr)     \
  do {                                        \
    if (absl::Status s_ = (expr); !s_.ok()) { \
      return s_;                              \
    }                                         \
  } while (0)

namespace muflow::engine::topology::topology_detail {

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

/// [router] (sim backend): kind, seed, skew, hot_experts, alpha, exp_rate, file.
absl::Status parse_router_table(const TomlTableReader& reader,
                                const std::filesystem::path& base_dir, routing::RouterSpec* out);

/// [network] (sim backend): intra_node, inter_node, host_link, activation_bytes.
absl::Status parse_network_table(const TomlTableReader& reader, NetworkSpec* out);
/// `[cost]` (sim): step overheads (every kind, and per kind under `[cost.kinds."KIND"]`)
/// and `[cost.expert_ffn]` calibration; the CSV must exist.
absl::Status parse_cost_table(const TomlTableReader& reader, const std::filesystem::path& base_dir,
                              CostSpec* out);

/// Checks a device kind for `backend`: "cpu" for the cpu backend, a simulated device kind
/// (kernels/sim/device_kind.hpp) for sim.
absl::Status check_device_kind(const TomlTableReader& reader, std::string_view key,
                               const std::string& backend, const std::string& kind);

/// `[cluster] workers` (an array of tables: address, devices) and `[cluster] token_file`, after
/// the devices were read into `topo->devices` (topology_workers.cpp). Workers need
/// backend = "cpu"; every device index is in range and listed by at most one worker.
absl::Status parse_cluster_workers(const TomlTableReader& reader,
                                   const std::filesystem::path& base_dir, Topology* topo);

}  // namespace muflow::engine::topology::topology_detail
