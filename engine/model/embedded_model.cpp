#include "engine/model/embedded_model.hpp"

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "engine/sv_cat.hpp"

namespace muflow::engine::model {
namespace {

namespace fs = std::filesystem;

// `base/name` made absolute (against the working directory) and lexically normal.
std::string join_absolute(const fs::path& base, std::string_view name) {
  std::error_code ec;
  fs::path p = fs::absolute(base / fs::path(name), ec);
  if (ec) p = base / fs::path(name);
  return p.lexically_normal().string();
}

bool has_config(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / "config.json", ec);
}

}  // namespace

std::vector<ModelDirCandidate> embedded_model_candidates(std::string_view name) {
  std::vector<ModelDirCandidate> out;
  const std::string env_name(kModelsDirEnv);
  if (const char* env = std::getenv(env_name.c_str()); env != nullptr && *env != '\0') {
    out.push_back({join_absolute(env, name), env_name});
    return out;
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && !exe.empty()) {
    out.push_back({join_absolute(exe.parent_path() / ".." / "share" / "muflow" / "models", name),
                   "installed next to the executable"});
  }
#ifdef MUFLOW_SOURCE_MODELS_DIR
  out.push_back({join_absolute(MUFLOW_SOURCE_MODELS_DIR, name), "the source tree"});
#endif
  return out;
}

absl::StatusOr<std::string> embedded_model_dir(std::string_view name) {
  const std::vector<ModelDirCandidate> candidates = embedded_model_candidates(name);
  for (const ModelDirCandidate& c : candidates) {
    if (has_config(c.path)) return c.path;
  }
  std::string looked;
  for (const ModelDirCandidate& c : candidates) {
    looked += sv_cat(looked.empty() ? "" : ", ", c.path, " (", c.why, ")");
  }
  if (candidates.size() == 1 && candidates[0].why == kModelsDirEnv) {
    return absl::NotFoundError(sv_cat(
        "the embedded model '", name, "' is not in ", kModelsDirEnv, "='",
        std::getenv(std::string(kModelsDirEnv).c_str()), "': no ", candidates[0].path,
        "/config.json; set ", kModelsDirEnv, " to the folder that holds ", name,
        "/ (the repository's models/ or an installed <prefix>/share/muflow/models), or unset "
        "it to look in the default places"));
  }
  return absl::NotFoundError(sv_cat(
      "the embedded model '", name, "' was not found (a folder with config.json); looked in: ",
      looked.empty() ? std::string("nowhere") : looked, ". Set ", kModelsDirEnv,
      " to the folder that holds ", name,
      "/ (the repository's models/ or an installed <prefix>/share/muflow/models)"));
}

}  // namespace muflow::engine::model
