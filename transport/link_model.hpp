#pragma once
/// \file
/// Link classes for the sim backend's network model (ARCHITECTURE.md §4): a bandwidth per
/// direction and a per-transfer latency, with named presets for the links the seed papers
/// ran on. Plain C++, no CAF; values only, no state.

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace muflow::transport {

/// One direction of one kind of link as a port sees it.
/// `bandwidth_bytes_per_s`: bytes per second in ONE direction (datasheets quote NVLink
/// bidirectionally; the presets below halve those figures). Must be > 0; +infinity models
/// an ideal link. `latency_s`: fixed seconds added to every transfer that moves bytes
/// (software launch plus wire), >= 0.
struct LinkClass {
  double bandwidth_bytes_per_s = 0.0;
  double latency_s = 0.0;
};

/// Named presets. Bandwidths are the datasheet or line rates per direction (PCIe: typical
/// effective host-copy rates); latencies are round order-of-magnitude estimates of a
/// transfer's fixed cost, not datasheet values: calibrate both against measurements. The
/// table with sources is in transport/README.md.
namespace links {
/// H100 SXM NVLink 4 through NVSwitch: 900 GB/s bidirectional per GPU (NVIDIA H100 datasheet).
inline constexpr LinkClass kNvlink4H100{450e9, 2e-6};
/// H200 SXM: same NVLink 4 figure, 900 GB/s bidirectional (NVIDIA H200 datasheet).
inline constexpr LinkClass kNvlink4H200{450e9, 2e-6};
/// A100 SXM NVLink 3 through NVSwitch: 600 GB/s bidirectional per GPU (NVIDIA A100
/// datasheet; AsyncMoE Table 2, MoEShard §3.2).
inline constexpr LinkClass kNvlink3A100{300e9, 2e-6};
/// V100 SXM2 NVLink 2: 6 links x 25 GB/s per direction = 300 GB/s bidirectional (NVIDIA
/// V100 datasheet). In a DGX-1 (HarMoEny §5.1) the links form a hybrid cube mesh, not a
/// switch: each GPU reaches 4 of its 7 peers directly. A big switch with the GPU's whole
/// 150 GB/s per port is therefore an optimistic bound for all-to-all; lower it to calibrate.
inline constexpr LinkClass kNvlink2V100{150e9, 3e-6};
/// PCIe 3.0 x16: 15.75 GB/s raw per direction (8 GT/s, 128b/130b); ~12 GB/s effective
/// pinned host copy.
inline constexpr LinkClass kPcie3x16{12e9, 5e-6};
/// PCIe 4.0 x16: 31.5 GB/s raw per direction; ~25 GB/s effective.
inline constexpr LinkClass kPcie4x16{25e9, 5e-6};
/// PCIe 5.0 x16: 63 GB/s raw per direction; ~50 GB/s effective.
inline constexpr LinkClass kPcie5x16{50e9, 5e-6};
/// 100 Gb/s InfiniBand (HDR100) per GPU: 12.5 GB/s line rate. Aurora §8.1 simulates a
/// 100 Gbps big switch.
inline constexpr LinkClass kIb100G{12.5e9, 5e-6};
/// 200 Gb/s InfiniBand (HDR) per GPU: 25 GB/s line rate.
inline constexpr LinkClass kIb200G{25e9, 5e-6};
/// 400 Gb/s InfiniBand (NDR) per GPU: 50 GB/s line rate.
inline constexpr LinkClass kIb400G{50e9, 5e-6};
/// 100 Gb/s Ethernet (RoCE, or one AWS EFA adapter as in AsyncMoE Table 2): 12.5 GB/s
/// line rate; higher latency than InfiniBand.
inline constexpr LinkClass kEth100G{12.5e9, 15e-6};
/// Devices in one process (the cpu backend): a batch is handed over by pointer, no bytes
/// move and no time passes (infinite bandwidth, zero latency). For simulating the cpu
/// backend's own runs (`muflow calibrate`).
inline constexpr LinkClass kInProcess{std::numeric_limits<double>::infinity(), 0.0};
}  // namespace links

/// The preset called `name` (lower case, e.g. "nvlink4-h100", "pcie4-x16", "ib-200g"; the
/// list is `link_class_names()`). Errors: NotFound naming the known presets.
absl::StatusOr<LinkClass> link_class_by_name(std::string_view name);

/// The preset names `link_class_by_name` accepts, in table order.
std::vector<std::string> link_class_names();

/// OK when bandwidth > 0 (may be +infinity) and 0 <= latency < infinity; InvalidArgument
/// naming `what` otherwise (NaN included).
absl::Status validate_link_class(const LinkClass& link, std::string_view what);

/// Seconds to move `bytes` over `link` alone: 0 for bytes == 0, else latency + bytes / bw.
/// `bytes` >= 0 (caller invariant).
double transfer_seconds(const LinkClass& link, int64_t bytes);

}  // namespace muflow::transport
