// Tests of engine/model/tokenizer with the real kjv-mixtral-tiny SentencePiece model. Expected ids
// come from the Python sentencepiece binding (python3-sentencepiece 0.1.97):
//   spm.SentencePieceProcessor(model_file="tokenizer.model").encode(text)

#include "engine/model/tokenizer.hpp"
#include "scratch_path.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace muflow::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

const fs::path kModelDir = fs::path(MUFLOW_DATA_DIR) / "models" / "kjv-mixtral-tiny";

class TokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kModelDir / "tokenizer.model")) {
      GTEST_SKIP() << "real tokenizer not found: " << kModelDir.string()
                   << "/tokenizer.model (see shared/data/README.md)";
    }
    absl::StatusOr<std::unique_ptr<model::Tokenizer>> tok =
        model::Tokenizer::load_from_model_dir(kModelDir);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = *std::move(tok);
  }
  std::unique_ptr<model::Tokenizer> tok_;
};

TEST_F(TokenizerTest, SpecialIdsMatchTheModelReadme) {
  EXPECT_EQ(tok_->vocab_size(), 4096);
  EXPECT_EQ(tok_->unk_id(), 0);
  EXPECT_EQ(tok_->bos_id(), 1);
  EXPECT_EQ(tok_->eos_id(), 2);
  EXPECT_EQ(tok_->id_to_piece(1), "<s>");
  EXPECT_EQ(tok_->id_to_piece(2), "</s>");
  EXPECT_EQ(tok_->id_to_piece(4096), "<invalid-token:4096>");
}

TEST_F(TokenizerTest, EncodesKjvVersesLikeSentencePiecePython) {
  EXPECT_THAT(tok_->encode("In the beginning God created the heaven and the earth.", false),
              ElementsAre(1026, 261, 2261, 400, 3369, 261, 764, 270, 261, 635, 4057));
  EXPECT_THAT(tok_->encode("And the LORD spake unto Moses, saying,", false),
              ElementsAre(300, 261, 340, 810, 322, 676, 4049, 547, 4049));
  // Prompt format from the model's README: [1] + encode(text).
  EXPECT_THAT(tok_->encode("Jesus wept.", true), ElementsAre(1, 674, 2485, 4057));
  EXPECT_THAT(tok_->encode("", true), ElementsAre(1));
  EXPECT_TRUE(tok_->encode("", false).empty());
}

TEST_F(TokenizerTest, RoundTripsKjvTextAndUnseenBytes) {
  const std::string texts[] = {
      "In the beginning God created the heaven and the earth. And the earth was without form, "
      "and void; and darkness was upon the face of the deep.",
      "For God so loved the world, that he gave his only begotten Son, that whosoever "
      "believeth in him should not perish, but have everlasting life.",
      "Jesus wept.",
      "naïve 中文 ☃",  // not in the training text: byte fallback
  };
  for (const std::string& text : texts) {
    SCOPED_TRACE(text);
    const std::vector<int32_t> ids = tok_->encode(text, true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), 1);
    for (int32_t id : ids) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, tok_->vocab_size());
    }
    EXPECT_EQ(tok_->decode(ids), text);  // BOS decodes to nothing
    EXPECT_EQ(tok_->decode(tok_->encode(text, false)), text);
  }
  EXPECT_THAT(tok_->encode("naïve 中文 ☃", false),
              ElementsAre(296, 4038, 198, 178, 323, 4034, 231, 187, 176, 233, 153, 138, 4034, 229,
                          155, 134));
}

TEST_F(TokenizerTest, DecodeSkipsControlIdsAndMarksInvalidOnes) {
  std::vector<int32_t> ids = tok_->encode("Jesus wept.", true);
  ids.push_back(tok_->eos_id());
  EXPECT_EQ(tok_->decode(ids), "Jesus wept.");
  EXPECT_EQ(tok_->decode({674, -3, 2485, 9999}), "Jesus<invalid-token:-3>wept<invalid-token:9999>");
  EXPECT_EQ(tok_->decode({}), "");
}

TEST(TokenizerLoadTest, MissingAndCorruptFiles) {
  const fs::path dir = muflow::testing::scratch_path("tokenizer_test");
  fs::remove_all(dir);
  fs::create_directories(dir);
  absl::StatusOr<std::unique_ptr<model::Tokenizer>> tok =
      model::Tokenizer::load_from_model_dir(dir.string());
  EXPECT_TRUE(absl::IsNotFound(tok.status()));
  EXPECT_THAT(std::string(tok.status().message()), HasSubstr("no tokenizer.model"));

  tok = model::Tokenizer::load((dir / "absent.model").string());
  EXPECT_TRUE(absl::IsNotFound(tok.status()));

  std::ofstream(dir / "tokenizer.model") << "this is not a protobuf";
  tok = model::Tokenizer::load_from_model_dir(dir.string());
  ASSERT_FALSE(tok.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(tok.status())) << tok.status();
  EXPECT_THAT(std::string(tok.status().message()),
              HasSubstr((dir / "tokenizer.model").string() + ": not a SentencePiece model"));
}

}  // namespace
}  // namespace muflow::engine
