#include "transport/big_switch_network.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/assert.hpp"

namespace muflow::transport {
namespace {

/// List-scheduling step shared by the pure and the stateful paths: `transfer` waits for
/// `floor_s`, its ready time and both ports, then holds both for `seconds`.
double serve(const Transfer& transfer, double seconds, double floor_s, double& egress_free,
             double& ingress_free) {
  const double start = std::max({floor_s, transfer.ready_s, egress_free, ingress_free});
  const double finish = start + seconds;
  egress_free = finish;
  ingress_free = finish;
  return finish;
}

/// Host-link step: one PCIe direction of one device, serialized.
double serve_host(const LinkClass& link, int64_t bytes, double ready_s, double& port_free) {
  MUFLOW_ASSERT(bytes >= 0, "host copy of a negative number of bytes");
  MUFLOW_ASSERT(!std::isnan(ready_s), "host copy ready time is NaN");
  if (bytes == 0) {
    return ready_s;
  }
  const double finish = std::max(ready_s, port_free) + transfer_seconds(link, bytes);
  port_free = finish;
  return finish;
}

/// kFairShare resource capacities: per device egress intra/inter, ingress intra/inter.
std::vector<double> fair_share_capacities(const std::vector<DeviceLinks>& devices) {
  std::vector<double> cap;
  cap.reserve(devices.size() * 4);
  for (const DeviceLinks& d : devices) {
    cap.insert(cap.end(), {d.intra_node.bandwidth_bytes_per_s, d.inter_node.bandwidth_bytes_per_s,
                           d.intra_node.bandwidth_bytes_per_s, d.inter_node.bandwidth_bytes_per_s});
  }
  return cap;
}

}  // namespace

absl::StatusOr<NetworkModel> parse_network_model(std::string_view name) {
  if (name == "serial") return NetworkModel::kSerial;
  if (name == "fair-share") return NetworkModel::kFairShare;
  return absl::InvalidArgumentError(absl::StrCat("network model '", std::string(name),
                                                 "' is not one of: serial, fair-share"));
}

std::string_view network_model_name(NetworkModel model) {
  return model == NetworkModel::kFairShare ? "fair-share" : "serial";
}

BigSwitchNetwork::BigSwitchNetwork(std::vector<DeviceLinks> devices, NetworkModel model)
    : model_(model),
      devices_(std::move(devices)),
      egress_free_(devices_.size(), 0.0),
      ingress_free_(devices_.size(), 0.0),
      h2d_free_(devices_.size(), 0.0),
      d2h_free_(devices_.size(), 0.0),
      fair_(model == NetworkModel::kFairShare ? FairShareLinks(fair_share_capacities(devices_))
                                              : FairShareLinks()) {}

absl::StatusOr<BigSwitchNetwork> BigSwitchNetwork::create(std::vector<DeviceLinks> devices,
                                                          NetworkModel model) {
  if (devices.empty()) {
    return absl::InvalidArgumentError("network: no devices");
  }
  for (size_t d = 0; d < devices.size(); ++d) {
    const DeviceLinks& dev = devices[d];
    if (dev.node < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("network: device ", d, ": node index ", dev.node, " is negative"));
    }
    const std::string where = absl::StrCat("network: device ", d);
    for (const auto& [link, name] :
         {std::pair{&dev.intra_node, "intra_node"}, std::pair{&dev.inter_node, "inter_node"},
          std::pair{&dev.host, "host"}}) {
      if (absl::Status s = validate_link_class(*link, absl::StrCat(where, " ", name)); !s.ok()) {
        return s;
      }
    }
  }
  return BigSwitchNetwork(std::move(devices), model);
}

absl::StatusOr<BigSwitchNetwork> BigSwitchNetwork::uniform(int32_t num_devices,
                                                           int32_t devices_per_node,
                                                           LinkClass intra_node,
                                                           LinkClass inter_node, LinkClass host,
                                                           NetworkModel model) {
  if (num_devices < 1 || devices_per_node < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("network: need num_devices >= 1 and devices_per_node >= 1, got ", num_devices,
                     " and ", devices_per_node));
  }
  std::vector<DeviceLinks> devices(static_cast<size_t>(num_devices));
  for (int32_t d = 0; d < num_devices; ++d) {
    devices[static_cast<size_t>(d)] = {d / devices_per_node, intra_node, inter_node, host};
  }
  return create(std::move(devices), model);
}

bool BigSwitchNetwork::same_node(int32_t a, int32_t b) const {
  return device(a).node == device(b).node;
}

LinkClass BigSwitchNetwork::path(int32_t src, int32_t dst) const {
  const bool intra = same_node(src, dst);
  const LinkClass& s = intra ? device(src).intra_node : device(src).inter_node;
  const LinkClass& d = intra ? device(dst).intra_node : device(dst).inter_node;
  return {std::min(s.bandwidth_bytes_per_s, d.bandwidth_bytes_per_s),
          std::max(s.latency_s, d.latency_s)};
}

double BigSwitchNetwork::transfer_seconds(int32_t src, int32_t dst, int64_t bytes) const {
  check_device(src);
  check_device(dst);
  MUFLOW_ASSERT(bytes >= 0, "transfer of a negative number of bytes");
  if (src == dst || bytes == 0) {
    return 0.0;
  }
  return transport::transfer_seconds(path(src, dst), bytes);
}

FairShareFlow BigSwitchNetwork::fair_share_flow(const Transfer& t, double floor_s) const {
  const bool intra = same_node(t.src, t.dst);
  const int32_t kind = intra ? 0 : 1;
  return FairShareFlow{4 * t.src + kind, 4 * t.dst + 2 + kind, static_cast<double>(t.bytes),
                       std::max(floor_s, t.ready_s), path(t.src, t.dst).latency_s};
}

std::vector<double> BigSwitchNetwork::fair_share_finish(const std::vector<Transfer>& ordered,
                                                        double floor_s,
                                                        FairShareLinks* commit_to) const {
  std::vector<double> finish(ordered.size(), 0.0);
  std::vector<FairShareFlow> flows;
  std::vector<size_t> index;  // flow -> position in `ordered`
  for (size_t i = 0; i < ordered.size(); ++i) {
    const Transfer& t = ordered[i];
    check_device(t.src);
    check_device(t.dst);
    MUFLOW_ASSERT(t.bytes >= 0, "transfer of a negative number of bytes");
    MUFLOW_ASSERT(!std::isnan(t.ready_s), "transfer ready time is NaN");
    if (t.src == t.dst || t.bytes == 0) {
      finish[i] = std::max(floor_s, t.ready_s);
      continue;
    }
    flows.push_back(fair_share_flow(t, floor_s));
    index.push_back(i);
  }
  const std::vector<double> done =
      commit_to != nullptr ? commit_to->schedule(flows) : fair_.finish_times(flows);
  for (size_t f = 0; f < flows.size(); ++f) finish[index[f]] = done[f];
  return finish;
}

std::vector<double> BigSwitchNetwork::finish_times(const std::vector<Transfer>& ordered,
                                                   double now_s) const {
  MUFLOW_ASSERT(!std::isnan(now_s), "now is NaN");
  if (model_ == NetworkModel::kFairShare) {
    return fair_share_finish(ordered, now_s, nullptr);
  }
  std::vector<double> egress = egress_free_;
  std::vector<double> ingress = ingress_free_;
  std::vector<double> finish;
  finish.reserve(ordered.size());
  for (const Transfer& t : ordered) {
    const double seconds = transfer_seconds(t.src, t.dst, t.bytes);
    MUFLOW_ASSERT(!std::isnan(t.ready_s), "transfer ready time is NaN");
    if (t.src == t.dst || t.bytes == 0) {
      finish.push_back(std::max(now_s, t.ready_s));
      continue;
    }
    finish.push_back(serve(t, seconds, now_s, egress[static_cast<size_t>(t.src)],
                           ingress[static_cast<size_t>(t.dst)]));
  }
  return finish;
}

double BigSwitchNetwork::schedule(const Transfer& t) {
  if (model_ == NetworkModel::kFairShare) {
    return fair_share_finish({t}, -std::numeric_limits<double>::infinity(), &fair_).front();
  }
  const double seconds = transfer_seconds(t.src, t.dst, t.bytes);
  MUFLOW_ASSERT(!std::isnan(t.ready_s), "transfer ready time is NaN");
  if (t.src == t.dst || t.bytes == 0) {
    return t.ready_s;
  }
  return serve(t, seconds, t.ready_s, egress_free_[static_cast<size_t>(t.src)],
               ingress_free_[static_cast<size_t>(t.dst)]);
}

std::vector<double> BigSwitchNetwork::schedule_all(const std::vector<Transfer>& ordered) {
  if (model_ == NetworkModel::kFairShare) {
    return fair_share_finish(ordered, -std::numeric_limits<double>::infinity(), &fair_);
  }
  std::vector<double> finish;
  finish.reserve(ordered.size());
  for (const Transfer& t : ordered) {
    finish.push_back(schedule(t));
  }
  return finish;
}

double BigSwitchNetwork::host_to_device(int32_t device_index, int64_t bytes, double ready_s) {
  return serve_host(device(device_index).host, bytes, ready_s,
                    h2d_free_[static_cast<size_t>(device_index)]);
}

double BigSwitchNetwork::device_to_host(int32_t device_index, int64_t bytes, double ready_s) {
  return serve_host(device(device_index).host, bytes, ready_s,
                    d2h_free_[static_cast<size_t>(device_index)]);
}

double BigSwitchNetwork::egress_free_s(int32_t d) const {
  check_device(d);
  return egress_free_[static_cast<size_t>(d)];
}
double BigSwitchNetwork::ingress_free_s(int32_t d) const {
  check_device(d);
  return ingress_free_[static_cast<size_t>(d)];
}
double BigSwitchNetwork::host_to_device_free_s(int32_t d) const {
  check_device(d);
  return h2d_free_[static_cast<size_t>(d)];
}
double BigSwitchNetwork::device_to_host_free_s(int32_t d) const {
  check_device(d);
  return d2h_free_[static_cast<size_t>(d)];
}

void BigSwitchNetwork::reset() {
  std::fill(egress_free_.begin(), egress_free_.end(), 0.0);
  std::fill(ingress_free_.begin(), ingress_free_.end(), 0.0);
  std::fill(h2d_free_.begin(), h2d_free_.end(), 0.0);
  std::fill(d2h_free_.begin(), d2h_free_.end(), 0.0);
  fair_.reset();
}

}  // namespace muflow::transport
