// The WordPiece model of tokenizer.json ("model": {"type": "WordPiece", ...}: BERT and the
// sentence-transformers encoders built on it) as `tokenizers` applies it to one pre-tokenized word:
// greedy longest match first from the left, pieces after the first spelled with
// continuing_subword_prefix ("##"); a word with a piece no token matches, or longer than
// max_input_chars_per_word characters, becomes the one unk token.
//
//   GPUOPT_ASSIGN_OR_RETURN(auto wp, WordPieceModel::from_json(j["model"]));
//   std::vector<int64_t> ids;
//   wp->tokenize("unaffable", ids);   // e.g. "un", "##aff", "##able"
#pragma once

#include <memory>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "llm/tok_bpe.h"
#include "llm/tok_model.h"

namespace gpuopt::llm::tok {

class WordPieceModel final : public Model {
 public:
  // `model` is tokenizer.json's "model" object; errors name what is wrong (the caller adds the file).
  static Result<std::unique_ptr<WordPieceModel>> from_json(const nlohmann::json& model);

  void tokenize(std::string_view word, std::vector<int64_t>& out) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  const std::string* id_to_token(int64_t id) const override;
  int64_t max_id() const override { return static_cast<int64_t>(vocab_r_.size()) - 1; }

 private:
  Vocab vocab_;
  std::vector<std::string> vocab_r_;
  std::vector<bool> has_id_;
  int32_t unk_id_ = 0;
  std::string prefix_ = "##";
  size_t max_chars_ = 100;
};

// BertNormalizer's steps and BertPreTokenizer's punctuation, with the character tables of the
// Rust crate `tokenizers` uses for them (unicode_categories, older than utf8proc's Unicode).
struct BertNormalizerOptions {
  bool clean_text = true, handle_chinese_chars = true, strip_accents = true, lowercase = true;
};
std::string bert_normalize(std::string_view s, const BertNormalizerOptions& o);
bool is_bert_punctuation(char32_t cp);
bool is_onig_word_char(char32_t cp);  // Oniguruma's Unicode \w (the Whitespace pre-tokenizer's)

}  // namespace gpuopt::llm::tok
