#pragma once
/// \file
/// Where the model folders shipped with muflow (the repository's `models/`) are found at run
/// time: the trained KJV model that `muflow run` / `muflow serve` use when given no topology.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace muflow::engine::model {

/// Folder name of the embedded default model: this project's trained BF16 KJV Mixtral
/// (`models/kjv-mixtral-tiny-bf16/`, see `models/README.md`).
inline constexpr std::string_view kEmbeddedModelName = "kjv-mixtral-tiny-bf16";

/// Environment variable naming the folder that holds the shipped model folders (the one with
/// `kjv-mixtral-tiny-bf16/` in it). When set and non-empty it is the only place looked in.
inline constexpr std::string_view kModelsDirEnv = "MUFLOW_MODELS_DIR";

/// One place a shipped model folder is looked for.
struct ModelDirCandidate {
  std::string path;  ///< absolute (lexically normal) folder path, `<models dir>/<name>`
  std::string why;   ///< where the place comes from, e.g. "MUFLOW_MODELS_DIR"
};

/// The places `embedded_model_dir(name)` looks, in order:
/// 1. `$MUFLOW_MODELS_DIR/<name>` when that variable is set and non-empty — then only this
///    one, so that a wrong setting is reported instead of silently bypassed;
/// 2. `<folder of the running executable>/../share/muflow/models/<name>` (an installed muflow:
///    `bin/muflow` next to `share/muflow/models/`; the executable from /proc/self/exe);
/// 3. `<source tree>/models/<name>` (a build-tree binary; the path is compiled in).
/// Reads the environment and /proc/self/exe; touches no other state. Any thread (as long as
/// no other thread changes the environment meanwhile).
std::vector<ModelDirCandidate> embedded_model_candidates(
    std::string_view name = kEmbeddedModelName);

/// Absolute path of the shipped model folder `name`: the first candidate of
/// `embedded_model_candidates(name)` that is a folder with a `config.json` in it.
/// Errors: NotFound listing every place looked in and saying how to fix it (set
/// MUFLOW_MODELS_DIR to the folder holding `<name>/`, or give a topology file). Whether the
/// folder's weights load is the loader's business (engine/model/model_loader.hpp).
/// Any thread (see embedded_model_candidates).
absl::StatusOr<std::string> embedded_model_dir(std::string_view name = kEmbeddedModelName);

}  // namespace muflow::engine::model
