// `[[cluster.workers]]` and `[cluster] token_file` (#18): which worker process hosts which
// devices, and where the cluster secret is read from.
#include <algorithm>
#include <set>
#include <string>

#include "engine/sv_cat.hpp"
#include "engine/topology/topology_sections.hpp"

namespace muflow::engine::topology::topology_detail {
namespace {

constexpr std::string_view kWorkerKeys[] = {"address", "devices"};

// "HOST:PORT" with a non-empty host and a port in [1, 65535] (a worker's --listen port 0 is
// resolved by whoever starts it: `muflow run --spawn-workers` reads the port the worker
// prints). The host itself is checked when the driver connects.
bool plausible_address(const std::string& a, bool allow_port_zero) {
  const size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == a.size() || a.size() - colon > 6) {
    return false;
  }
  int64_t port = 0;
  for (size_t i = colon + 1; i < a.size(); ++i) {
    if (a[i] < '0' || a[i] > '9') return false;
    port = port * 10 + (a[i] - '0');
  }
  return port <= 65535 && (port > 0 || allow_port_zero);
}

}  // namespace

absl::Status parse_cluster_workers(const TomlTableReader& r, const std::filesystem::path& base_dir,
                                   Topology* topo) {
  if (r.has("token_file")) {
    MUFLOW_TOPO_RETURN_IF_ERROR(r.read_string("token_file", &topo->cluster_token_file));
    topo->cluster_token_file = resolve_path(base_dir, topo->cluster_token_file);
  }
  topo->workers.clear();
  if (!r.has("workers")) return absl::OkStatus();
  if (topo->backend != "cpu") {
    return r.error("workers", sv_cat("worker processes host cpu devices only (backend = \"",
                                     topo->backend, "\" runs in one process)"));
  }
  const toml::array* arr = r.node("workers")->as_array();
  if (arr == nullptr || arr->empty() || !arr->is_array_of_tables()) {
    return r.error("workers", sv_cat("expected a non-empty array of tables ([[cluster.workers]] "
                                     "with address = \"HOST:PORT\" and devices = [...]), got ",
                                     toml_type_name(*r.node("workers"))));
  }
  if (static_cast<int64_t>(arr->size()) > kMaxWorkers) {
    return r.error("workers",
                   sv_cat("expected at most ", kMaxWorkers, " workers, got ", arr->size()));
  }
  const auto num_devices = static_cast<int64_t>(topo->devices.size());
  std::set<int64_t> taken;
  std::set<std::string> addresses;
  for (size_t i = 0; i < arr->size(); ++i) {
    const TomlTableReader w(*(*arr)[i].as_table(), r.source(),
                            sv_cat(r.prefix(), ".workers[", i, "]"));
    MUFLOW_TOPO_RETURN_IF_ERROR(w.check_keys(kWorkerKeys));
    WorkerSpec spec;
    if (!w.has("address")) return w.table_error("a worker needs address = \"HOST:PORT\"");
    MUFLOW_TOPO_RETURN_IF_ERROR(w.read_string("address", &spec.address));
    if (!plausible_address(spec.address, /*allow_port_zero=*/true)) {
      return w.error("address", sv_cat("expected \"HOST:PORT\" with a port in [0, 65535], got \"",
                                       spec.address, "\""));
    }
    const bool port_zero =
        spec.address.size() >= 2 && spec.address.compare(spec.address.size() - 2, 2, ":0") == 0;
    if (!port_zero && !addresses.insert(spec.address).second) {
      return w.error("address", sv_cat("two workers listen on ", spec.address));
    }
    const toml::node* n = w.node("devices");
    const toml::array* devs = n ? n->as_array() : nullptr;
    const std::string expected =
        sv_cat("a non-empty array of device indices in [0, ", num_devices, ")");
    if (devs == nullptr || devs->empty()) {
      return n ? w.error("devices", sv_cat("expected ", expected, ", got ",
                                           devs ? "an empty array" : toml_type_name(*n)))
               : w.table_error(sv_cat("a worker needs devices = [...]: ", expected));
    }
    for (size_t j = 0; j < devs->size(); ++j) {
      const auto* v = (*devs)[j].as_integer();
      if (v == nullptr || v->get() < 0 || v->get() >= num_devices) {
        return w.error("devices", sv_cat("expected ", expected, ", got ",
                                         v ? sv_cat(v->get()) : toml_type_name((*devs)[j])));
      }
      if (!taken.insert(v->get()).second) {
        return w.error("devices", sv_cat("device ", v->get(), " is listed by two workers"));
      }
      spec.devices.push_back(v->get());
    }
    std::sort(spec.devices.begin(), spec.devices.end());
    topo->workers.push_back(std::move(spec));
  }
  return absl::OkStatus();
}

}  // namespace muflow::engine::topology::topology_detail
