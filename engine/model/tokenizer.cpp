#include "engine/model/tokenizer.hpp"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "kernels/assert.hpp"

// sentencepiece_processor.h (0.1.97) declares `namespace absl { using std::string_view; }`,
// which clashes with Abseil's own absl::string_view class (this Abseil is built with
// ABSL_OPTION_USE_STD_STRING_VIEW 0). Renaming the namespace for that one header keeps both:
// its `absl::string_view` parameters are std::string_view either way, so the mangled names
// (and the library's symbols) are unchanged.
#define absl muflow_sentencepiece_absl
#include <sentencepiece_processor.h>
#undef absl

namespace muflow::engine::model {

namespace {

std::string invalid_marker(int32_t id) { return absl::StrCat("<invalid-token:", id, ">"); }

}  // namespace

Tokenizer::Tokenizer() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}

Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::load(const std::string& model_path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(model_path, ec)) {
    return absl::NotFoundError(absl::StrCat(model_path, ": tokenizer model not found"));
  }
  std::unique_ptr<Tokenizer> tok(new Tokenizer());
  const sentencepiece::util::Status s = tok->sp_->Load(model_path);
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(model_path, ": not a SentencePiece model: ", s.ToString()));
  }
  if (tok->sp_->GetPieceSize() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(model_path, ": SentencePiece model has no pieces"));
  }
  return tok;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::load_from_model_dir(const std::string& dir) {
  const std::filesystem::path path = std::filesystem::path(dir) / "tokenizer.model";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(dir, ": no tokenizer.model in the model folder"));
  }
  return load(path.string());
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int> ids;
  const sentencepiece::util::Status s = sp_->Encode(text, &ids);
  // Encode fails only on an unloaded model, which `load` rules out.
  MUFLOW_ASSERT(s.ok(), "SentencePiece Encode failed on a loaded model");
  std::vector<int32_t> out;
  out.reserve(ids.size() + 1);
  if (add_bos && bos_id() >= 0) out.push_back(bos_id());
  out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  std::vector<int> run;
  auto flush = [&] {
    if (run.empty()) return;
    std::string text;
    const sentencepiece::util::Status s = sp_->Decode(run, &text);
    MUFLOW_ASSERT(s.ok(), "SentencePiece Decode failed on in-range ids");
    out += text;
    run.clear();
  };
  for (int32_t id : ids) {
    if (id >= 0 && id < vocab_size()) {
      run.push_back(id);
    } else {
      flush();
      out += invalid_marker(id);
    }
  }
  flush();
  return out;
}

int32_t Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }
int32_t Tokenizer::bos_id() const { return sp_->bos_id(); }
int32_t Tokenizer::eos_id() const { return sp_->eos_id(); }
int32_t Tokenizer::unk_id() const { return sp_->unk_id(); }

std::string Tokenizer::id_to_piece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return invalid_marker(id);
  return sp_->IdToPiece(id);
}

}  // namespace muflow::engine::model
