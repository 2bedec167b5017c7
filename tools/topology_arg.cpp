#include "tools/topology_arg.hpp"

namespace muflow::tools {

absl::StatusOr<engine::topology::Topology> load_topology_arg(const std::string& path) {
  if (path.empty()) return engine::topology::default_topology();
  return engine::topology::parse_topology_file(path);
}

}  // namespace muflow::tools
