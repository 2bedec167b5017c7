#include "actors/backends/sim_setup.hpp"

#include <map>

#include "absl/strings/str_format.h"
#include "engine/exec/device_activity.hpp"
#include "engine/exec/sim_executor.hpp"

namespace muflow::actors {
namespace {

// Default fabric link of a device kind (kernels/sim/device_kind.hpp names).
const char* default_intra_node(const std::string& kind) {
  if (kind.rfind("H200", 0) == 0) return "nvlink4-h200";
  if (kind.rfind("H100", 0) == 0) return "nvlink4-h100";
  if (kind.rfind("A100", 0) == 0) return "nvlink3-a100";
  if (kind.rfind("V100", 0) == 0) return "nvlink2-v100";
  return "pcie4-x16";
}

const char* default_host_link(const std::string& kind) {
  if (kind.rfind("H", 0) == 0) return "pcie5-x16";
  if (kind.rfind("A100", 0) == 0) return "pcie4-x16";
  if (kind.rfind("V100", 0) == 0) return "pcie3-x16";
  return "pcie4-x16";
}

absl::StatusOr<transport::LinkClass> link(const engine::topology::Topology& t, const char* key,
                                          const std::string& given, const char* fallback) {
  const std::string name = given.empty() ? fallback : given;
  absl::StatusOr<transport::LinkClass> found = transport::link_class_by_name(name);
  if (found.ok()) return found;
  auto where = t.network.where.find(key);
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: key 'network.%s': %s", where != t.network.where.end() ? where->second : t.source, key,
      found.status().message()));
}

/// The measured file must describe this model: its `# key=value` dims and dtype.
absl::Status check_measured_dims(const kernels::sim::MeasuredKernels& m,
                                 const engine::model::ModelConfig& c, const std::string& dtype) {
  const std::pair<const char*, int64_t> want[] = {
      {"hidden", c.hidden_size},    {"ffn", c.expert_ffn},    {"heads", c.num_heads},
      {"kv_heads", c.num_kv_heads}, {"head_dim", c.head_dim}, {"experts", c.num_experts},
      {"topk", c.num_topk},         {"vocab", c.vocab_size}};
  for (const auto& [key, value] : want) {
    auto it = m.meta().find(key);
    if (it == m.meta().end() || it->second != std::to_string(value)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "measured for %s=%s, the model has %s=%d (run `muflow calibrate` on this model)", key,
          it == m.meta().end() ? "?" : it->second, key, value));
    }
  }
  auto it = m.meta().find("dtype");
  if (it == m.meta().end() || it->second != dtype) {
    return absl::InvalidArgumentError(
        absl::StrFormat("measured in dtype %s, the topology's [model] dtype is %s",
                        it == m.meta().end() ? "?" : it->second, dtype));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<transport::LinkClass> host_link_for(const engine::topology::Topology& t,
                                                   const kernels::sim::DeviceKind& kind) {
  if (t.network.host_link.empty() && kind.name == "cpu") {
    // A cpu device's weights already sit in host memory: a "host copy" is a memcpy at the
    // kind's measured memory rate (kernels/sim/device_kind.cpp), not a PCIe transfer.
    return transport::LinkClass{kind.host_link_bytes_per_s, 0.0};
  }
  return link(t, "host_link", t.network.host_link, default_host_link(kind.name));
}

absl::StatusOr<SimSetup> make_sim_setup(const engine::topology::Topology& t,
                                        const engine::model::ModelConfig& config) {
  SimSetup setup;
  absl::StatusOr<std::unique_ptr<engine::routing::RouterModel>> router =
      engine::routing::make_router_model(t.router, config.num_experts, config.num_topk,
                                         config.num_layers);
  if (!router.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: [router]: %s", t.source, router.status().message()));
  }
  setup.router = std::shared_ptr<const engine::routing::RouterModel>(std::move(*router));
  auto cost = std::make_shared<kernels::sim::CostModel>();
  if (const std::optional<engine::topology::ExpertFfnCalibration>& cal = t.cost.expert_ffn) {
    absl::StatusOr<kernels::sim::DeviceKind> kind = kernels::sim::find_device_kind(cal->kind);
    if (!kind.ok()) return kind.status();  // checked by the parser
    absl::StatusOr<kernels::sim::CalibrationFit> fit = cost->calibrate_expert_ffn(
        cal->file, cal->hidden, cal->ffn,
        cal->ffn_kind == "swiglu" ? kernels::sim::FfnKind::kSwiGlu
                                  : kernels::sim::FfnKind::kTwoLayer,
        *kind,
        cal->dtype == "bf16" ? kernels::sim::Precision::kBF16 : kernels::sim::Precision::kF32);
    if (!fit.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: key 'cost.expert_ffn.file': %s",
                                                        cal->where, fit.status().message()));
    }
    setup.calibration = *fit;
  }
  setup.cost = std::move(cost);
  if (!t.cost.kernels.empty()) {
    absl::StatusOr<kernels::sim::MeasuredKernels> m =
        kernels::sim::MeasuredKernels::read_csv(t.cost.kernels);
    if (!m.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: key 'cost.kernels': %s", t.cost.kernels_where, m.status().message()));
    }
    if (absl::Status s = check_measured_dims(*m, config, t.model.dtype); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: key 'cost.kernels': %s: %s", t.cost.kernels_where, t.cost.kernels, s.message()));
    }
    setup.measured = std::make_shared<const kernels::sim::MeasuredKernels>(std::move(*m));
  }
  std::map<std::string, int32_t> nodes;
  for (const engine::topology::DeviceSpec& d : t.devices) {
    absl::StatusOr<kernels::sim::DeviceKind> kind = kernels::sim::find_device_kind(d.kind);
    if (!kind.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: device '%s': %s", t.source, d.name, kind.status().message()));
    }
    auto intra = link(t, "intra_node", t.network.intra_node, default_intra_node(d.kind));
    if (!intra.ok()) return intra.status();
    auto inter = link(t, "inter_node", t.network.inter_node, "ib-200g");
    if (!inter.ok()) return inter.status();
    absl::StatusOr<transport::LinkClass> host = host_link_for(t, *kind);
    if (!host.ok()) return host.status();
    const auto node = nodes.emplace(d.node, static_cast<int32_t>(nodes.size())).first->second;
    setup.kinds.push_back(*kind);
    const engine::topology::StepOverheads& o = t.cost.of(d.kind);
    const double measured_overhead_s = setup.measured && setup.measured->kind() == d.kind
                                           ? setup.measured->stage_overhead_s()
                                           : 0.0;
    const double base_s = (o.stage_us + o.scheduler_us) * 1e-6 + measured_overhead_s;
    setup.step_overhead_s.push_back({base_s + o.attention_us * 1e-6, base_s + o.expert_us * 1e-6,
                                     base_s + o.attention_us * 1e-6});
    setup.links.push_back(transport::DeviceLinks{node, *intra, *inter, *host});
  }
  absl::StatusOr<transport::NetworkModel> model = transport::parse_network_model(t.network.model);
  if (!model.ok()) return model.status();
  setup.network_model = *model;
  return setup;
}

std::vector<std::shared_ptr<engine::exec::Executor>> make_sim_executors(
    const SimSetup& setup, const engine::model::ModelConfig& c, kernels::sim::Precision precision) {
  std::vector<std::shared_ptr<engine::exec::Executor>> out;
  // Measured kernels with `expert_alone` rows depend on which devices of a node are busy.
  std::shared_ptr<engine::exec::DeviceActivity> activity;
  if (setup.measured && setup.measured->has_expert_alone()) {
    std::vector<int32_t> nodes;
    for (const transport::DeviceLinks& l : setup.links) nodes.push_back(l.node);
    activity = std::make_shared<engine::exec::DeviceActivity>(std::move(nodes));
  }
  for (size_t d = 0; d < setup.kinds.size(); ++d) {
    const kernels::sim::DeviceKind& kind = setup.kinds[d];
    const bool measured = setup.measured && setup.measured->kind() == kind.name;
    out.push_back(std::make_shared<engine::exec::SimExecutor>(
        c, kind, setup.cost, setup.router, precision, measured ? setup.measured : nullptr,
        measured ? activity : nullptr, static_cast<int64_t>(d)));
  }
  return out;
}

absl::StatusOr<std::shared_ptr<transport::BigSwitchNetwork>> make_sim_network(
    const SimSetup& setup) {
  absl::StatusOr<transport::BigSwitchNetwork> net =
      transport::BigSwitchNetwork::create(setup.links, setup.network_model);
  if (!net.ok()) return net.status();
  return std::make_shared<transport::BigSwitchNetwork>(std::move(*net));
}

}  // namespace muflow::actors
