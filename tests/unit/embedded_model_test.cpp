// The shipped model folder (models/kjv-mixtral-tiny-bf16) and the embedded default topology
// built on it: where the folder is looked for, that it loads, and the errors a user sees when
// it is not where MUFLOW_MODELS_DIR says.

#include "engine/model/embedded_model.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "engine/model/model_loader.hpp"
#include "engine/model/tokenizer.hpp"
#include "engine/topology/topology.hpp"
#include "scoped_env.hpp"
#include "scratch_path.hpp"

namespace muflow::engine {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string msg(const absl::Status& status) { return std::string(status.message()); }

// Sets (or, with nullopt, unsets) MUFLOW_MODELS_DIR for one test and restores it after.
class ModelsDirEnv : public muflow::testing::ScopedEnv {
 public:
  explicit ModelsDirEnv(const std::optional<std::string>& value)
      : ScopedEnv("MUFLOW_MODELS_DIR", value) {}
};

fs::path scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path dir = muflow::testing::scratch_path(std::string("embedded_model_") + info->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

const fs::path kSourceModels = fs::path(MUFLOW_SOURCE_DIR) / "models";

std::string shipped_dir() {
  return (kSourceModels / std::string(model::kEmbeddedModelName)).lexically_normal().string();
}

TEST(EmbeddedModel, LooksInstalledThenSourceTreeWhenEnvUnset) {
  ModelsDirEnv env(std::nullopt);
  const std::vector<model::ModelDirCandidate> c = model::embedded_model_candidates();
  ASSERT_EQ(c.size(), 2u);
  // This test binary lives in <build>/tests/: the installed place is <build>/share/muflow/...
  const fs::path exe = fs::read_symlink("/proc/self/exe");
  EXPECT_EQ(c[0].path, (exe.parent_path().parent_path() / "share" / "muflow" / "models" /
                        std::string(model::kEmbeddedModelName))
                           .lexically_normal()
                           .string());
  EXPECT_EQ(c[1].path, shipped_dir());
  EXPECT_EQ(c[1].why, "the source tree");
}

TEST(EmbeddedModel, ResolvesToTheShippedFolderAndLoads) {
  ModelsDirEnv env(std::nullopt);
  absl::StatusOr<std::string> dir = model::embedded_model_dir();
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, shipped_dir());

  absl::StatusOr<std::shared_ptr<const model::ModelWeights>> weights = model::load_hf_model(*dir);
  ASSERT_TRUE(weights.ok()) << weights.status();
  const model::ModelConfig& c = (*weights)->config;
  EXPECT_EQ(c.model_type, model::ModelType::kMixtral);
  EXPECT_EQ(c.vocab_size, 4096);
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.num_layers, 4);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_topk, 2);

  absl::StatusOr<std::unique_ptr<model::Tokenizer>> tok =
      model::Tokenizer::load_from_model_dir(*dir);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 4096);
  EXPECT_EQ((*tok)->bos_id(), 1);
}

TEST(EmbeddedModel, EnvVarWins) {
  const fs::path dir = scratch_dir();
  const fs::path model = dir / std::string(model::kEmbeddedModelName);
  fs::create_directories(model);
  std::ofstream(model / "config.json") << "{}";
  ModelsDirEnv env(dir.string());
  const std::vector<model::ModelDirCandidate> c = model::embedded_model_candidates();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].why, "MUFLOW_MODELS_DIR");
  absl::StatusOr<std::string> found = model::embedded_model_dir();
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, model.lexically_normal().string());

  // The repository's models/ itself works as MUFLOW_MODELS_DIR.
  ModelsDirEnv source(kSourceModels.string());
  found = model::embedded_model_dir();
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, shipped_dir());
}

TEST(EmbeddedModel, EmptyEnvDirIsAClearNotFound) {
  const fs::path dir = scratch_dir();
  ModelsDirEnv env(dir.string());
  absl::StatusOr<std::string> found = model::embedded_model_dir();
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  const std::string m = msg(found.status());
  EXPECT_THAT(m, HasSubstr("MUFLOW_MODELS_DIR='" + dir.string() + "'"));
  EXPECT_THAT(m, HasSubstr((dir / "kjv-mixtral-tiny-bf16").string() + "/config.json"));
  EXPECT_THAT(m, HasSubstr("set MUFLOW_MODELS_DIR to the folder that holds "
                           "kjv-mixtral-tiny-bf16/"));

  // A folder without config.json does not count either.
  fs::create_directories(dir / "kjv-mixtral-tiny-bf16");
  EXPECT_EQ(model::embedded_model_dir().status().code(), absl::StatusCode::kNotFound);

  // The default topology passes the error on and names the way out.
  absl::StatusOr<topology::Topology> t = topology::default_topology();
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(msg(t.status()), HasSubstr("MUFLOW_MODELS_DIR"));
  EXPECT_THAT(msg(t.status()), HasSubstr("muflow run --synthetic"));
}

TEST(EmbeddedModel, UnknownNameListsEveryPlace) {
  ModelsDirEnv env(std::nullopt);
  absl::StatusOr<std::string> found = model::embedded_model_dir("no-such-model");
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  const std::string m = msg(found.status());
  for (const model::ModelDirCandidate& c : model::embedded_model_candidates("no-such-model")) {
    EXPECT_THAT(m, HasSubstr(c.path + " (" + c.why + ")"));
  }
  EXPECT_THAT(m, HasSubstr("Set MUFLOW_MODELS_DIR"));
}

}  // namespace
}  // namespace muflow::engine
